#include "cohort/device/cuda_kernels.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "cohort/device/cuda_memory.h"
#include "cohort/kernels/cuda/attention.h"
#include "cohort/kernels/cuda/conv.h"
#include "cohort/kernels/cuda/dropout.h"
#include "cohort/kernels/cuda/elementwise.h"
#include "cohort/kernels/cuda/embedding.h"
#include "cohort/kernels/cuda/layer_norm.h"
#include "cohort/kernels/cuda/matmul.h"
#include "cohort/kernels/cuda/optim.h"
#include "cohort/kernels/cuda/reduce.h"
#include "cohort/kernels/cuda/reduce_max.h"
#include "cohort/kernels/cuda/softmax.h"
#include "cohort/tensor/device_memory.h"

namespace cohort::device {
namespace {

using cpu::BinaryOp;
using cpu::MatRef;
using cpu::UnaryOp;

// The stream of d's GPU, with d made the thread's current device (kernels launch there).
cudaStream_t on(Device d) {
  int current = -1;
  COHORT_CUDA_CHECK(cudaGetDevice(&current));
  if (current != d.index) COHORT_CUDA_CHECK(cudaSetDevice(d.index));
  return cuda_stream(d.index);
}

// One cuBLASLt handle per GPU, made on first use (it holds a 32 MiB workspace) and kept for the
// process, as the streams are. Its plan cache is not thread-safe: calls are serialised.
struct GemmState {
  std::mutex mu;
  std::vector<std::unique_ptr<cuda::MatmulHandle>> handles;
};

GemmState& gemm_state() {
  static GemmState* s = new GemmState;  // outlives static tensors
  return *s;
}

// GPU d's handle, made on first use. Under s.mu.
cuda::MatmulHandle& handle(GemmState& s, Device d, cudaStream_t stream) {
  if (int(s.handles.size()) <= d.index) s.handles.resize(size_t(d.index) + 1);
  auto& h = s.handles[size_t(d.index)];
  if (!h) h = std::make_unique<cuda::MatmulHandle>(stream);
  return *h;
}

cuda::MatmulArgs matmul_args(int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b,
                             float beta, float* c, int64_t ldc) {
  auto ref = [](MatRef r) {
    return cuda::DeviceMatRef{r.data, r.ld,
                              r.trans == cpu::Trans::kYes ? cuda::Trans::kYes : cuda::Trans::kNo};
  };
  cuda::MatmulArgs args;
  args.m = m, args.n = n, args.k = k;
  args.a = ref(a), args.b = ref(b);
  args.c = c, args.ldc = ldc;
  args.alpha = alpha, args.beta = beta;
  return args;
}

void sgemm(Device d, int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b, float beta,
           float* c, int64_t ldc) {
  const cudaStream_t stream = on(d);
  GemmState& s = gemm_state();
  std::lock_guard<std::mutex> lock(s.mu);
  handle(s, d, stream).matmul(matmul_args(m, n, k, alpha, a, b, beta, c, ldc));
}

// A bf16 copy of a stored [rows, cols] operand with its row stride, in a block of d's caching
// allocator; handed back when it goes out of scope, which is safe once the gemm that reads it
// is queued: the block's next user runs after it on the same stream.
class Bf16Operand {
 public:
  Bf16Operand(Device d, MatRef r, int64_t rows, int64_t cols, cudaStream_t stream) : d_(d) {
    const int64_t n = rows > 0 ? (rows - 1) * r.ld + cols : 0;
    p_ = device_memory(d).allocate(d.index, size_t(std::max<int64_t>(n, 1)) * 2, &rounded_);
    cuda::f32_to_bf16(r.data, static_cast<uint16_t*>(p_), n, stream);
  }
  ~Bf16Operand() { device_memory(d_).deallocate(d_.index, p_, rounded_); }
  Bf16Operand(const Bf16Operand&) = delete;
  Bf16Operand& operator=(const Bf16Operand&) = delete;
  const void* data() const { return p_; }

 private:
  Device d_;
  void* p_ = nullptr;
  size_t rounded_ = 0;
};

// train.precision = "bf16": a and b rounded to bf16 on the device, then cuBLASLt's bf16 gemm
// with f32 accumulation into the f32 c (kernels/cpu/gemm.h's gemm_bf16 on the CPU).
void gemm_bf16(Device d, int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b,
               float beta, float* c, int64_t ldc) {
  if (k == 0) return sgemm(d, m, n, k, alpha, a, b, beta, c, ldc);
  const cudaStream_t stream = on(d);
  const bool at = a.trans == cpu::Trans::kYes, bt = b.trans == cpu::Trans::kYes;
  const Bf16Operand a16(d, a, at ? k : m, at ? m : k, stream);
  const Bf16Operand b16(d, b, bt ? n : k, bt ? k : n, stream);
  cuda::MatmulArgs args = matmul_args(m, n, k, alpha, a, b, beta, c, ldc);
  args.a.data = a16.data(), args.b.data = b16.data();
  args.in = cuda::DType::kBF16;
  GemmState& s = gemm_state();
  std::lock_guard<std::mutex> lock(s.mu);
  handle(s, d, stream).matmul(args);
}

// conv2d: im2col and the gemms on GPU d's handle (serialised with the other gemms).
int64_t conv2d_forward_workspace(Device, const cpu::Conv2dShape& s) {
  return cuda::conv2d_forward_workspace(s);
}
int64_t conv2d_backward_workspace(Device, const cpu::Conv2dShape& s) {
  return cuda::conv2d_backward_workspace(s);
}
void conv2d_forward(Device d, const cpu::Conv2dShape& s, const float* x, const float* w,
                    const float* bias, float* y, float* workspace) {
  const cudaStream_t stream = on(d);
  GemmState& g = gemm_state();
  std::lock_guard<std::mutex> lock(g.mu);
  cuda::conv2d_forward(handle(g, d, stream), s, x, w, bias, y, workspace, stream);
}
void conv2d_backward(Device d, const cpu::Conv2dShape& s, const float* x, const float* w,
                     const float* dy, const cpu::Conv2dGrads& grads, float* workspace) {
  const cudaStream_t stream = on(d);
  GemmState& g = gemm_state();
  std::lock_guard<std::mutex> lock(g.mu);
  cuda::conv2d_backward(handle(g, d, stream), s, x, w, dy, grads, workspace, stream);
}

void binary_2d(Device d, BinaryOp op, int64_t rows, int64_t n, const float* a, int64_t a_row,
               int64_t a_col, const float* b, int64_t b_row, int64_t b_col, float* out) {
  cuda::binary_2d(cuda::math::Binary(op), rows, n, a, a_row, a_col, b, b_row, b_col, out, on(d));
}

void unary(Device d, UnaryOp op, const float* x, float* out, int64_t n) {
  cuda::unary(cuda::math::Unary(op), x, out, n, on(d));
}

template <cuda::math::UnaryGrad G>
void unary_backward(Device d, const float* y, const float* g, float* dx, int64_t n) {
  cuda::unary_backward(G, y, g, dx, n, on(d));
}

// F(args..., stream) as a table entry (Device, args...): for the kernels/cuda functions whose
// arguments are the table's with the stream last.
template <auto F, typename Fn = decltype(F)>
struct OnGpu;
template <auto F, typename... Ps>
struct OnGpu<F, void (*)(Ps...)> {
  using Params = std::tuple<Ps...>;
  template <size_t... I>
  static constexpr auto entry(std::index_sequence<I...>) {
    return +[](Device d, std::tuple_element_t<I, Params>... args) { F(args..., on(d)); };
  }
  static constexpr auto call = entry(std::make_index_sequence<sizeof...(Ps) - 1>{});
};

// The summed loss, copied to the host (the trainer reads it every step anyway).
double cross_entropy_forward(Device d, const float* logits, const int64_t* targets, int64_t n,
                             int64_t c, float* stats) {
  const cudaStream_t stream = on(d);
  Tensor loss = empty({1}, DType::f64, d);
  cuda::cross_entropy_forward(logits, targets, n, c, stats, loss.data<double>(), stream);
  return loss.to(Device::cpu()).data<double>()[0];
}

// A list of parameters through the fused multi-tensor kernels: one launch for every 36 (AdamW)
// or 48 (SGD) tensors; the scalars are kernels/cpu/optim.h's on both sides.
void adamw_update(Device d, std::span<const cpu::AdamWParam> params, const cpu::AdamScalars& s) {
  std::vector<cuda::AdamWTensor> list;
  list.reserve(params.size());
  for (const cpu::AdamWParam& x : params) list.push_back({x.p, x.g, x.m, x.v, x.n});
  cuda::adamw_multi_tensor(list, s, on(d));
}

void sgd_update(Device d, std::span<const cpu::SgdParam> params, const cpu::SgdScalars& s,
                cpu::SgdPhase phase, bool nesterov) {
  std::vector<cuda::SgdTensor> list;
  list.reserve(params.size());
  for (const cpu::SgdParam& x : params) list.push_back({x.p, x.g, x.buf, x.n});
  cuda::sgd_multi_tensor(list, s, phase, nesterov, on(d));
}

const dispatch::KernelTable kCuda = {
    .binary_2d = binary_2d,
    .affine = OnGpu<cuda::affine>::call,
    .unary = unary,
    .pow_scalar = OnGpu<cuda::pow_scalar>::call,
    .relu_backward = OnGpu<cuda::relu_backward>::call,
    .gelu_backward = OnGpu<cuda::gelu_backward>::call,
    .tanh_backward = unary_backward<cuda::math::UnaryGrad::kTanh>,
    .sigmoid_backward = unary_backward<cuda::math::UnaryGrad::kSigmoid>,
    .sqrt_backward = unary_backward<cuda::math::UnaryGrad::kSqrt>,
    .pow_scalar_backward = OnGpu<cuda::pow_scalar_backward>::call,
    .sum_middle = OnGpu<cuda::sum_middle>::call,
    .broadcast_middle = OnGpu<cuda::broadcast_middle>::call,
    .max_middle = OnGpu<cuda::max_middle>::call,
    .max_middle_backward = OnGpu<cuda::max_middle_backward>::call,
    .sgemm = sgemm,
    .gemm_bf16 = gemm_bf16,
    .fill_rows = OnGpu<cuda::fill_rows>::call,
    .sum_rows = OnGpu<cuda::sum_rows>::call,
    .softmax_rows = OnGpu<cuda::softmax_rows>::call,
    .log_softmax_rows = OnGpu<cuda::log_softmax_rows>::call,
    .softmax_backward_rows = OnGpu<cuda::softmax_backward_rows>::call,
    .log_softmax_backward_rows = OnGpu<cuda::log_softmax_backward_rows>::call,
    .cross_entropy_forward = cross_entropy_forward,
    .cross_entropy_backward = OnGpu<cuda::cross_entropy_backward>::call,
    .layer_norm_forward = OnGpu<cuda::layer_norm_forward>::call,
    .layer_norm_backward = OnGpu<cuda::layer_norm_backward>::call,
    .embedding_forward = OnGpu<cuda::embedding_forward>::call,
    .embedding_backward = OnGpu<cuda::embedding_backward>::call,
    .dropout_apply = OnGpu<cuda::dropout_apply>::call,
    .causal_attention_forward = OnGpu<cuda::causal_attention_forward>::call,
    .causal_attention_backward = OnGpu<cuda::causal_attention_backward>::call,
    .causal_attention_forward_bf16 = OnGpu<cuda::causal_attention_forward_bf16>::call,
    .causal_attention_backward_bf16 = OnGpu<cuda::causal_attention_backward_bf16>::call,
    .conv2d_forward_workspace = conv2d_forward_workspace,
    .conv2d_backward_workspace = conv2d_backward_workspace,
    .conv2d_forward = conv2d_forward,
    .conv2d_backward = conv2d_backward,
    .max_pool2d_forward = OnGpu<cuda::max_pool2d_forward>::call,
    .max_pool2d_backward = OnGpu<cuda::max_pool2d_backward>::call,
    .adamw_update = adamw_update,
    .sgd_update = sgd_update,
};

}  // namespace

const dispatch::KernelTable& cuda_kernel_table() {
  return kCuda;
}

}  // namespace cohort::device
