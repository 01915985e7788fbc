// The CPU's kernel table: kernels/cpu behind the entry points of kernel_table.h (the Device
// argument is the CPU's and says nothing more).
#include "cohort/dispatch/kernel_table.h"
#include "cohort/kernels/cpu/dropout.h"
#include "cohort/kernels/cpu/embedding.h"
#include "cohort/kernels/cpu/reduce.h"
#include "cohort/kernels/cpu/softmax.h"

namespace cohort::dispatch {
namespace {

// f with a leading Device it ignores: one wrapper per kernels/cpu function.
template <auto F>
struct OnCpu;
template <typename R, typename... Args, R (*F)(Args...)>
struct OnCpu<F> {
  static R call(Device, Args... args) { return F(args...); }
};

void embedding_forward(Device, const float* weight, int64_t v, int64_t d, const int64_t* idx,
                       int64_t n, float* out) {
  cpu::embedding_forward(weight, d, idx, n, out);  // ops/ checked every index against v
}

// The lists one parameter after the other (a device table launches them together).
void adamw_update(Device, std::span<const cpu::AdamWParam> params, const cpu::AdamScalars& s) {
  for (const cpu::AdamWParam& x : params) cpu::adamw_update(x.p, x.g, x.m, x.v, x.n, s);
}
void sgd_update(Device, std::span<const cpu::SgdParam> params, const cpu::SgdScalars& s,
                cpu::SgdPhase phase, bool nesterov) {
  for (const cpu::SgdParam& x : params) cpu::sgd_update(x.p, x.g, x.buf, x.n, s, phase, nesterov);
}

const KernelTable kCpu = {
    .binary_2d = OnCpu<cpu::binary_2d>::call,
    .affine = OnCpu<cpu::affine>::call,
    .unary = OnCpu<cpu::unary>::call,
    .pow_scalar = OnCpu<cpu::pow_scalar>::call,
    .relu_backward = OnCpu<cpu::relu_backward>::call,
    .gelu_backward = OnCpu<cpu::gelu_backward>::call,
    .tanh_backward = OnCpu<cpu::tanh_backward>::call,
    .sigmoid_backward = OnCpu<cpu::sigmoid_backward>::call,
    .sqrt_backward = OnCpu<cpu::sqrt_backward>::call,
    .pow_scalar_backward = OnCpu<cpu::pow_scalar_backward>::call,
    .sum_middle = OnCpu<cpu::sum_middle>::call,
    .broadcast_middle = OnCpu<cpu::broadcast_middle>::call,
    .max_middle = OnCpu<cpu::max_middle>::call,
    .max_middle_backward = OnCpu<cpu::max_middle_backward>::call,
    .sgemm = OnCpu<cpu::sgemm>::call,
    .gemm_bf16 = OnCpu<cpu::gemm_bf16>::call,
    .fill_rows = OnCpu<cpu::fill_rows>::call,
    .sum_rows = OnCpu<cpu::sum_rows>::call,
    .softmax_rows = OnCpu<cpu::softmax_rows>::call,
    .log_softmax_rows = OnCpu<cpu::log_softmax_rows>::call,
    .softmax_backward_rows = OnCpu<cpu::softmax_backward_rows>::call,
    .log_softmax_backward_rows = OnCpu<cpu::log_softmax_backward_rows>::call,
    .cross_entropy_forward = OnCpu<cpu::cross_entropy_forward>::call,
    .cross_entropy_backward = OnCpu<cpu::cross_entropy_backward>::call,
    .layer_norm_forward = OnCpu<cpu::layer_norm_forward>::call,
    .layer_norm_backward = OnCpu<cpu::layer_norm_backward>::call,
    .embedding_forward = embedding_forward,
    .embedding_backward = OnCpu<cpu::embedding_backward>::call,
    .dropout_apply = OnCpu<cpu::dropout_apply>::call,
    .causal_attention_forward = OnCpu<cpu::causal_attention_forward>::call,
    .causal_attention_backward = OnCpu<cpu::causal_attention_backward>::call,
    .causal_attention_forward_bf16 = OnCpu<cpu::causal_attention_forward_bf16>::call,
    .causal_attention_backward_bf16 = OnCpu<cpu::causal_attention_backward_bf16>::call,
    .conv2d_forward_workspace = OnCpu<cpu::conv2d_forward_workspace>::call,
    .conv2d_backward_workspace = OnCpu<cpu::conv2d_backward_workspace>::call,
    .conv2d_forward = OnCpu<cpu::conv2d_forward>::call,
    .conv2d_backward = OnCpu<cpu::conv2d_backward>::call,
    .max_pool2d_forward = OnCpu<cpu::max_pool2d_forward>::call,
    .max_pool2d_backward = OnCpu<cpu::max_pool2d_backward>::call,
    .adamw_update = adamw_update,
    .sgd_update = sgd_update,
};

}  // namespace

const KernelTable& cpu_table() {
  return kCpu;
}

}  // namespace cohort::dispatch
