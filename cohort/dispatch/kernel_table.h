#pragma once
// The kernels an op runs, per device: one table of entry points with the same arguments for
// every device (raw pointers; the Device says which GPU and so which stream). The CPU's table
// is kernels/cpu (cpu_table.cc); a device backend registers its own (device/cuda_kernels.cc).
// An op takes the table of its inputs' device (kernels_for) and makes its outputs on that
// device, so one op body serves every device. An entry a device lacks is null, and the op
// fails naming itself and the device (need), never running CPU code on device memory.
//
// Shapes and semantics are those of the kernels/cpu functions of the same names.
#include <cstdint>
#include <initializer_list>
#include <span>

#include "cohort/core/error.h"
#include "cohort/kernels/cpu/attention.h"
#include "cohort/kernels/cpu/conv.h"
#include "cohort/kernels/cpu/elementwise.h"
#include "cohort/kernels/cpu/gemm.h"
#include "cohort/kernels/cpu/norm.h"
#include "cohort/kernels/cpu/optim.h"
#include "cohort/tensor/tensor.h"

namespace cohort::dispatch {

using cpu::BinaryOp;
using cpu::LayerNormGrads;
using cpu::MatRef;
using cpu::UnaryOp;

struct KernelTable {
  // ---- elementwise (kernels/cpu/elementwise.h) ----
  void (*binary_2d)(Device, BinaryOp, int64_t rows, int64_t n, const float* a, int64_t a_row,
                    int64_t a_col, const float* b, int64_t b_row, int64_t b_col, float* out);
  void (*affine)(Device, const float* x, float scale, float shift, float* out, int64_t n);
  void (*unary)(Device, UnaryOp, const float* x, float* out, int64_t n);
  void (*pow_scalar)(Device, const float* x, float p, float* out, int64_t n);
  // dx = g * f'(.): from the forward input (relu, gelu) or output (tanh, sigmoid, sqrt).
  void (*relu_backward)(Device, const float* x, const float* g, float* dx, int64_t n);
  void (*gelu_backward)(Device, const float* x, const float* g, float* dx, int64_t n);
  void (*tanh_backward)(Device, const float* y, const float* g, float* dx, int64_t n);
  void (*sigmoid_backward)(Device, const float* y, const float* g, float* dx, int64_t n);
  void (*sqrt_backward)(Device, const float* y, const float* g, float* dx, int64_t n);
  void (*pow_scalar_backward)(Device, const float* x, float p, const float* g, float* dx,
                              int64_t n);

  // ---- reductions (kernels/cpu/reduce.h) ----
  void (*sum_middle)(Device, const float* x, int64_t outer, int64_t r, int64_t inner, float* out);
  void (*broadcast_middle)(Device, const float* g, int64_t outer, int64_t r, int64_t inner,
                           float scale, float* out);
  void (*max_middle)(Device, const float* x, int64_t outer, int64_t r, int64_t inner, float* val,
                     int64_t* idx);
  void (*max_middle_backward)(Device, const float* g, const int64_t* idx, int64_t outer, int64_t r,
                              int64_t inner, float* dx);

  // ---- matrix products (kernels/cpu/gemm.h) ----
  void (*sgemm)(Device, int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b,
                float beta, float* c, int64_t ldc);
  // The same with a and b rounded to bf16 and f32 accumulation (train.precision = "bf16").
  void (*gemm_bf16)(Device, int64_t m, int64_t n, int64_t k, float alpha, MatRef a, MatRef b,
                    float beta, float* c, int64_t ldc);
  void (*fill_rows)(Device, float* y, const float* bias, int64_t rows, int64_t cols);
  void (*sum_rows)(Device, const float* g, int64_t rows, int64_t cols, float* out);

  // ---- softmax and cross-entropy (kernels/cpu/softmax.h) ----
  void (*softmax_rows)(Device, const float* x, int64_t rows, int64_t cols, float* y);
  void (*log_softmax_rows)(Device, const float* x, int64_t rows, int64_t cols, float* y);
  void (*softmax_backward_rows)(Device, const float* y, const float* g, int64_t rows, int64_t cols,
                                float* dx);
  void (*log_softmax_backward_rows)(Device, const float* y, const float* g, int64_t rows,
                                    int64_t cols, float* dx);
  // The summed loss over the rows (the caller divides by n), returned to the host.
  double (*cross_entropy_forward)(Device, const float* logits, const int64_t* targets, int64_t n,
                                  int64_t c, float* stats);
  void (*cross_entropy_backward)(Device, const float* logits, const int64_t* targets,
                                 const float* stats, int64_t n, int64_t c, float scale, float* dx);

  // ---- layer norm, embedding (kernels/cpu/norm.h, embedding.h) ----
  void (*layer_norm_forward)(Device, const float* x, const float* weight, const float* bias,
                             int64_t rows, int64_t d, float eps, float* y, float* mean,
                             float* rstd);
  void (*layer_norm_backward)(Device, const float* dy, const float* x, const float* weight,
                              const float* mean, const float* rstd, int64_t rows, int64_t d,
                              const LayerNormGrads& grads);
  void (*embedding_forward)(Device, const float* weight, int64_t v, int64_t d, const int64_t* idx,
                            int64_t n, float* out);
  void (*embedding_backward)(Device, const float* dout, const int64_t* idx, int64_t n, int64_t v,
                             int64_t d, float* dweight);

  // ---- dropout, attention (kernels/cpu/dropout.h, attention.h) ----
  void (*dropout_apply)(Device, const float* x, int64_t n, float p, uint64_t seed, float* y);
  void (*causal_attention_forward)(Device, const cpu::AttnShape& s, const cpu::AttnInputs& in,
                                   float* out, float* lse);
  void (*causal_attention_backward)(Device, const cpu::AttnShape& s, const cpu::AttnInputs& in,
                                    const float* dout, const float* lse, float* dq, float* dk,
                                    float* dv);
  // The same on bf16-rounded operands with f32 accumulation (train.precision = "bf16"; tensor
  // cores on a GPU); backward also takes forward's `out` (for D_t = bf16(dout_t) . out_t).
  void (*causal_attention_forward_bf16)(Device, const cpu::AttnShape& s, const cpu::AttnInputs& in,
                                        float* out, float* lse);
  void (*causal_attention_backward_bf16)(Device, const cpu::AttnShape& s, const cpu::AttnInputs& in,
                                         const float* out, const float* dout, const float* lse,
                                         float* dq, float* dk, float* dv);

  // ---- convolution and pooling (kernels/cpu/conv.h); workspaces in floats ----
  int64_t (*conv2d_forward_workspace)(Device, const cpu::Conv2dShape& s);
  int64_t (*conv2d_backward_workspace)(Device, const cpu::Conv2dShape& s);
  void (*conv2d_forward)(Device, const cpu::Conv2dShape& s, const float* x, const float* w,
                         const float* bias, float* y, float* workspace);
  void (*conv2d_backward)(Device, const cpu::Conv2dShape& s, const float* x, const float* w,
                          const float* dy, const cpu::Conv2dGrads& grads, float* workspace);
  void (*max_pool2d_forward)(Device, const cpu::Pool2dShape& s, const float* x, float* y,
                             int32_t* argmax);
  void (*max_pool2d_backward)(Device, const cpu::Pool2dShape& s, const float* dy,
                              const int32_t* argmax, float* dx);

  // ---- optimizers (kernels/cpu/optim.h): a list of parameters at the same step, updated
  // together (on a GPU one multi-tensor launch for the list, not one per parameter) ----
  void (*adamw_update)(Device, std::span<const cpu::AdamWParam> params, const cpu::AdamScalars& s);
  void (*sgd_update)(Device, std::span<const cpu::SgdParam> params, const cpu::SgdScalars& s,
                     cpu::SgdPhase phase, bool nesterov);
};

// The CPU's table (kernels/cpu).
const KernelTable& cpu_table();

// Registers the table of a device kind (not the CPU); null unregisters it. Done by a device
// backend once (device/cuda_kernels.cc), alongside its memory (tensor/device_memory.h).
void set_kernel_table(Device::Kind kind, const KernelTable* table);

// The table of `device`; InvalidArgument naming the device when it has none.
const KernelTable& kernels_for(Device device);

// The one device of an op's defined tensors (undefined ones, e.g. a missing bias, are skipped);
// InvalidArgument naming the op and both devices when two differ.
Device common_device(const char* op, std::initializer_list<const Tensor*> tensors);

// `entry`, or InvalidArgument "<op> has no kernel on cuda:0 yet" where the device lacks it.
template <typename Fn>
Fn need(Fn entry, const char* op, Device device) {
  COHORT_CHECK_ARG(entry != nullptr, op, " has no kernel on ", device.str(),
                   " yet: run it on the CPU (docs/gpu.md lists the ops that run on a GPU)");
  return entry;
}

}  // namespace cohort::dispatch
