#include "cohort/optim/clip.h"

#include <cmath>

#include "cohort/autograd/node.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/kernels/cpu/simd.h"

namespace cohort::optim {
namespace {

// x [n]: sum of squares with 8 independent double accumulators (vectorisable, fixed order).
COHORT_SIMD_CLONES
double sum_squares(const float* __restrict x, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += double(x[i + k]) * double(x[i + k]);
  for (; i < n; ++i) acc[0] += double(x[i]) * double(x[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

COHORT_SIMD_CLONES
void scale(float* __restrict x, int64_t n, float c) {
  for (int64_t i = 0; i < n; ++i) x[i] *= c;
}

// g [n] on a device: the sum of its squares into *out, a float of the same device (the
// device's own summation order). No host read: grad_norm reads every gradient's sum at once.
void device_sum_squares(const Tensor& g, float* out) {
  const Device d = g.device();
  const dispatch::KernelTable& k = dispatch::kernels_for(d);
  const int64_t n = g.numel();
  const float* x = g.data<float>();
  Tensor squares = empty({n}, DType::f32, d);
  k.binary_2d(d, cpu::BinaryOp::kMul, 1, n, x, 0, 1, x, 0, 1, squares.data<float>());
  dispatch::need(k.sum_middle, "clip_grad_norm", d)(d, squares.data<float>(), 1, n, 1, out);
}

// The gradients on device d, each summed on the device into one slot of a vector that is read
// back once: one host synchronisation per step, not one per parameter.
double device_sum_squares(const std::vector<Tensor>& grads, Device d) {
  Tensor partial = empty({int64_t(grads.size())}, DType::f32, d);
  for (size_t i = 0; i < grads.size(); ++i) device_sum_squares(grads[i], partial.data<float>() + i);
  double total = 0;
  for (float x : partial.to_vector<float>()) total += double(x);
  return total;
}

// x [n] *= c, on x's device.
void scale_on_device(const Tensor& x, float c) {
  if (x.device().is_cpu()) return scale(x.data<float>(), x.numel(), c);
  const Device d = x.device();
  dispatch::kernels_for(d).affine(d, x.data<float>(), c, 0.0f, x.data<float>(), x.numel());
}

Tensor checked_grad(const Tensor& p) {
  Tensor g = p.grad();
  if (!g.defined()) return g;
  COHORT_CHECK_ARG(g.dtype() == DType::f32 && g.is_contiguous(),
                   "clip_grad_norm: gradients must be contiguous float32, got ", g.str());
  return g;
}

}  // namespace

double grad_norm(const std::vector<Tensor>& params) {
  double total = 0;
  std::vector<Tensor> on_device;  // all on one device: a model's parameters are together
  for (const Tensor& p : params) {
    Tensor g = checked_grad(p);
    if (!g.defined()) continue;
    if (g.device().is_cpu()) {
      total += sum_squares(g.data<float>(), g.numel());
      continue;
    }
    COHORT_CHECK_ARG(on_device.empty() || on_device[0].device() == g.device(),
                     "clip_grad_norm: gradients on ", on_device[0].device().str(), " and ",
                     g.device().str(), ": a model's parameters must be on one device");
    on_device.push_back(g);
  }
  if (!on_device.empty()) total += device_sum_squares(on_device, on_device[0].device());
  return std::sqrt(total);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  COHORT_CHECK_ARG(max_norm >= 0, "clip_grad_norm: max_norm must be >= 0, got ", max_norm);
  double total = grad_norm(params);
  double coef = max_norm / (total + 1e-6);
  if (coef < 1.0 || !std::isfinite(total)) {
    autograd::NoGradGuard no_grad;
    for (const Tensor& p : params) {
      Tensor g = checked_grad(p);
      if (g.defined()) scale_on_device(g, float(coef));
    }
  }
  return total;
}

void scale_tensors(const std::vector<Tensor>& tensors, double coef) {
  autograd::NoGradGuard no_grad;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    COHORT_CHECK_ARG(t.dtype() == DType::f32 && t.is_contiguous(),
                     "scale_tensors: tensors must be contiguous float32, got ", t.str());
    scale_on_device(t, float(coef));
  }
}

double clip_grad_norm(const NamedParams& params, double max_norm) {
  std::vector<Tensor> ts;
  ts.reserve(params.size());
  for (const auto& [name, t] : params) ts.push_back(t);
  return clip_grad_norm(ts, max_norm);
}

}  // namespace cohort::optim
