// Unary elementwise ops: scalar arithmetic and activations. Each runs one contiguous kernel
// (a strided input is copied first) and saves for backward whichever of input or output makes
// the derivative cheapest: relu/gelu/log/pow the input, tanh/sigmoid/exp/sqrt the output.
#include <functional>

#include "cohort/autograd/node.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/ops/checks.h"
#include "cohort/ops/ops.h"

namespace cohort::ops {
namespace {

using cpu::UnaryOp;
using dispatch::kernels_for;
using dispatch::KernelTable;

// dx [n] = g [n] * f'(saved [n]) on the tensors' device.
using GradKernel = std::function<void(Device, const float*, const float*, float*, int64_t)>;

// A GradKernel from a table entry: the entry of the device the gradient is on.
template <auto Entry>
void grad_entry(Device d, const float* saved, const float* g, float* dx, int64_t n) {
  dispatch::need(kernels_for(d).*Entry, "backward", d)(d, saved, g, dx, n);
}

// dx = grad_kernel(saved, g): saved is the forward input or output, contiguous.
struct UnaryBackward : autograd::Node {
  std::string op;
  Tensor saved;
  GradKernel grad_kernel;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0].contiguous_raw();
    Tensor dx = empty(saved.shape(), DType::f32, saved.device());
    grad_kernel(saved.device(), saved.data<float>(), g.data<float>(), dx.data<float>(), dx.numel());
    return {dx};
  }
  std::string name() const override { return op + "Backward"; }
};

// x * scale + shift; backward multiplies by scale.
struct AffineBackward : autograd::Node {
  float scale = 1;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (scale == 1.0f) return {grads[0]};
    Tensor g = grads[0].contiguous_raw();
    Tensor dx = empty(g.shape(), DType::f32, g.device());
    kernels_for(g.device())
        .affine(g.device(), g.data<float>(), scale, 0.0f, dx.data<float>(), dx.numel());
    return {dx};
  }
  std::string name() const override { return "AffineBackward"; }
};

Tensor affine(const Tensor& x, float scale, float shift, const char* op) {
  check_f32(x, op);
  Tensor xc = x.contiguous_raw();
  Tensor out = empty(x.shape(), DType::f32, x.device());
  kernels_for(x.device())
      .affine(x.device(), xc.data<float>(), scale, shift, out.data<float>(), out.numel());
  if (auto node = autograd::make_node<AffineBackward>({x})) {
    node->scale = scale;
    autograd::set_history(out, node);
  }
  return out;
}

enum class Save { kInput, kOutput };

Tensor unary(const Tensor& x, UnaryOp kind, const char* op, Save save, GradKernel grad) {
  check_f32(x, op);
  Tensor xc = x.contiguous_raw();
  Tensor out = empty(x.shape(), DType::f32, x.device());
  dispatch::need(kernels_for(x.device()).unary, op, x.device())(x.device(), kind, xc.data<float>(),
                                                                out.data<float>(), out.numel());
  if (auto node = autograd::make_node<UnaryBackward>({x})) {
    node->op = op;
    node->saved = save == Save::kInput ? xc.detach() : out.detach();
    node->grad_kernel = std::move(grad);
    autograd::set_history(out, node);
  }
  return out;
}

// exp: g * y;  log: g / x.
void mul_grad(Device d, const float* y, const float* g, float* dx, int64_t n) {
  kernels_for(d).binary_2d(d, cpu::BinaryOp::kMul, 1, n, g, 0, 1, y, 0, 1, dx);
}
void div_grad(Device d, const float* x, const float* g, float* dx, int64_t n) {
  kernels_for(d).binary_2d(d, cpu::BinaryOp::kDiv, 1, n, g, 0, 1, x, 0, 1, dx);
}

}  // namespace

Tensor add_scalar(const Tensor& a, double s) {
  return affine(a, 1.0f, float(s), "add_scalar");
}
Tensor mul_scalar(const Tensor& a, double s) {
  return affine(a, float(s), 0.0f, "mul_scalar");
}
Tensor neg(const Tensor& a) {
  return affine(a, -1.0f, 0.0f, "neg");
}

Tensor pow_scalar(const Tensor& a, double p) {
  check_f32(a, "pow_scalar");
  const float pf = float(p);
  Tensor ac = a.contiguous_raw();
  Tensor out = empty(a.shape(), DType::f32, a.device());
  dispatch::need(kernels_for(a.device()).pow_scalar, "pow_scalar", a.device())(
      a.device(), ac.data<float>(), pf, out.data<float>(), out.numel());
  if (auto node = autograd::make_node<UnaryBackward>({a})) {
    node->op = "pow_scalar";
    node->saved = ac.detach();
    node->grad_kernel = [pf](Device d, const float* x, const float* g, float* dx, int64_t n) {
      dispatch::need(kernels_for(d).pow_scalar_backward, "pow_scalar backward", d)(d, x, pf, g, dx,
                                                                                   n);
    };
    autograd::set_history(out, node);
  }
  return out;
}

Tensor relu(const Tensor& x) {
  return unary(x, UnaryOp::kRelu, "relu", Save::kInput, grad_entry<&KernelTable::relu_backward>);
}
Tensor gelu(const Tensor& x) {
  return unary(x, UnaryOp::kGelu, "gelu", Save::kInput, grad_entry<&KernelTable::gelu_backward>);
}
Tensor tanh(const Tensor& x) {
  return unary(x, UnaryOp::kTanh, "tanh", Save::kOutput, grad_entry<&KernelTable::tanh_backward>);
}
Tensor sigmoid(const Tensor& x) {
  return unary(x, UnaryOp::kSigmoid, "sigmoid", Save::kOutput,
               grad_entry<&KernelTable::sigmoid_backward>);
}
Tensor exp(const Tensor& x) {
  return unary(x, UnaryOp::kExp, "exp", Save::kOutput, mul_grad);
}
Tensor log(const Tensor& x) {
  return unary(x, UnaryOp::kLog, "log", Save::kInput, div_grad);
}
Tensor sqrt(const Tensor& x) {
  return unary(x, UnaryOp::kSqrt, "sqrt", Save::kOutput, grad_entry<&KernelTable::sqrt_backward>);
}

}  // namespace cohort::ops
