// Unary elementwise ops: scalar arithmetic and activations. Each runs one contiguous kernel
// (a strided input is copied first) and saves for backward whichever of input or output makes
// the derivative cheapest: relu/gelu/log/pow the input, tanh/sigmoid/exp/sqrt the output.
#include <functional>

#include "cohort/autograd/node.h"
#include "cohort/kernels/cpu/elementwise.h"
#include "cohort/ops/checks.h"
#include "cohort/ops/ops.h"

namespace cohort::ops {
namespace {

using cpu::UnaryOp;

using Kernel = std::function<void(const float*, float*, int64_t)>;
using GradKernel = std::function<void(const float*, const float*, float*, int64_t)>;

// out = kernel(x) over a contiguous copy of x (no copy when x already is contiguous).
Tensor map_contiguous(const Tensor& x, const Kernel& kernel) {
  Tensor xc = x.contiguous_raw();
  Tensor out = empty(x.shape());
  kernel(xc.data<float>(), out.data<float>(), out.numel());
  return out;
}

// dx = grad_kernel(saved, g): saved is the forward input or output, contiguous.
struct UnaryBackward : autograd::Node {
  std::string op;
  Tensor saved;
  GradKernel grad_kernel;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0].contiguous_raw();
    Tensor dx = empty(saved.shape());
    grad_kernel(saved.data<float>(), g.data<float>(), dx.data<float>(), dx.numel());
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
    Tensor dx = empty(g.shape());
    cpu::affine(g.data<float>(), scale, 0.0f, dx.data<float>(), dx.numel());
    return {dx};
  }
  std::string name() const override { return "AffineBackward"; }
};

Tensor affine(const Tensor& x, float scale, float shift, const char* op) {
  check_f32(x, op);
  Tensor out = map_contiguous(
      x, [&](const float* in, float* o, int64_t n) { cpu::affine(in, scale, shift, o, n); });
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
  Tensor out = empty(x.shape());
  cpu::unary(kind, xc.data<float>(), out.data<float>(), out.numel());
  if (auto node = autograd::make_node<UnaryBackward>({x})) {
    node->op = op;
    node->saved = save == Save::kInput ? xc.detach() : out.detach();
    node->grad_kernel = std::move(grad);
    autograd::set_history(out, node);
  }
  return out;
}

void mul_grad(const float* y, const float* g, float* dx, int64_t n) {
  cpu::binary(cpu::BinaryOp::kMul, g, y, dx, n);
}
void div_grad(const float* x, const float* g, float* dx, int64_t n) {
  cpu::binary(cpu::BinaryOp::kDiv, g, x, dx, n);
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
  Tensor out = empty(a.shape());
  cpu::pow_scalar(ac.data<float>(), pf, out.data<float>(), out.numel());
  if (auto node = autograd::make_node<UnaryBackward>({a})) {
    node->op = "pow_scalar";
    node->saved = ac.detach();
    node->grad_kernel = [pf](const float* x, const float* g, float* dx, int64_t n) {
      cpu::pow_scalar_backward(x, pf, g, dx, n);
    };
    autograd::set_history(out, node);
  }
  return out;
}

Tensor relu(const Tensor& x) {
  return unary(x, UnaryOp::kRelu, "relu", Save::kInput, cpu::relu_backward);
}
Tensor gelu(const Tensor& x) {
  return unary(x, UnaryOp::kGelu, "gelu", Save::kInput, cpu::gelu_backward);
}
Tensor tanh(const Tensor& x) {
  return unary(x, UnaryOp::kTanh, "tanh", Save::kOutput, cpu::tanh_backward);
}
Tensor sigmoid(const Tensor& x) {
  return unary(x, UnaryOp::kSigmoid, "sigmoid", Save::kOutput, cpu::sigmoid_backward);
}
Tensor exp(const Tensor& x) {
  return unary(x, UnaryOp::kExp, "exp", Save::kOutput, mul_grad);
}
Tensor log(const Tensor& x) {
  return unary(x, UnaryOp::kLog, "log", Save::kInput, div_grad);
}
Tensor sqrt(const Tensor& x) {
  return unary(x, UnaryOp::kSqrt, "sqrt", Save::kOutput, cpu::sqrt_backward);
}

}  // namespace cohort::ops
