// Elementwise ops: NumPy-broadcasting binary ops, scalar ops and activations.
//
// A binary op brings both inputs to the output shape as strides (0 on a broadcast dim), merges
// dims that are contiguous for every operand, and hands the (at most) 2-D result to
// cpu::binary_2d, which has vectorised loops for same-shape, row- and column-broadcast
// layouts. Backward of a broadcast input sums the gradient back down with sum_to.
#include "cohort/autograd/node.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/ops/checks.h"
#include "cohort/ops/ops.h"
#include "cohort/tensor/strided.h"

namespace cohort::ops {
namespace {

using cpu::BinaryOp;
using cpu::UnaryOp;

// t's strides when viewed with shape `out` (aligned at the right; stride 0 where t broadcasts).
Shape expand_strides(const Tensor& t, const Shape& out) {
  Shape st(out.size(), 0);
  const size_t lead = out.size() - t.shape().size();
  for (size_t i = 0; i < t.shape().size(); ++i)
    st[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return st;
}

// The output shape with the two input stride vectors, after dropping size-1 dims and merging
// each dim into the next when both operands step through them as one.
struct Layout {
  Shape shape, sa, sb;
};

Layout coalesce(const Shape& shape, const Shape& sa, const Shape& sb) {
  Layout l;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!l.shape.empty()) {
      const int64_t n = shape[i];
      if (l.sa.back() == sa[i] * n && l.sb.back() == sb[i] * n) {
        l.shape.back() *= n;
        l.sa.back() = sa[i];
        l.sb.back() = sb[i];
        continue;
      }
    }
    l.shape.push_back(shape[i]);
    l.sa.push_back(sa[i]);
    l.sb.push_back(sb[i]);
  }
  return l;
}

void binary_into(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const Device d = out.device();
  const auto kernel = dispatch::kernels_for(d).binary_2d;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  Layout l = coalesce(out.shape(), expand_strides(a, out.shape()), expand_strides(b, out.shape()));
  const size_t nd = l.shape.size();
  if (nd == 0) return kernel(d, op, 1, 1, pa, 0, 0, pb, 0, 0, po);
  if (nd == 1) return kernel(d, op, 1, l.shape[0], pa, 0, l.sa[0], pb, 0, l.sb[0], po);
  // Innermost two dims per kernel call; any outer dims walked here.
  const int64_t rows = l.shape[nd - 2], n = l.shape[nd - 1];
  Shape outer(l.shape.begin(), l.shape.end() - 2);
  Shape oa(l.sa.begin(), l.sa.end() - 2), ob(l.sb.begin(), l.sb.end() - 2);
  int64_t k = 0;
  for_each_offset<2>(outer, {&oa, &ob}, [&](int64_t offa, int64_t offb) {
    kernel(d, op, rows, n, pa + offa, l.sa[nd - 2], l.sa[nd - 1], pb + offb, l.sb[nd - 2],
           l.sb[nd - 1], po + (k++) * rows * n);
  });
}

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "add";
    case BinaryOp::kSub:
      return "sub";
    case BinaryOp::kMul:
      return "mul";
    case BinaryOp::kDiv:
      return "div";
  }
  return "binary";
}

struct BinaryBackward : autograd::Node {
  BinaryOp op = BinaryOp::kAdd;
  Shape a_shape, b_shape;
  Tensor a, b;  // saved (detached) only where the gradient formula needs them
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor ga, gb;
    switch (op) {
      case BinaryOp::kAdd:
      case BinaryOp::kSub:
        if (needs_grad(0)) ga = sum_to(g, a_shape);
        if (needs_grad(1)) gb = op == BinaryOp::kAdd ? sum_to(g, b_shape) : neg(sum_to(g, b_shape));
        break;
      case BinaryOp::kMul:
        if (needs_grad(0)) ga = sum_to(mul(g, b), a_shape);
        if (needs_grad(1)) gb = sum_to(mul(g, a), b_shape);
        break;
      case BinaryOp::kDiv: {
        // d(a/b)/da = 1/b;  d(a/b)/db = -a/b^2 = -(1/b) (a/b).
        Tensor gq = div(g, b);
        if (needs_grad(0)) ga = sum_to(gq, a_shape);
        if (needs_grad(1)) gb = neg(sum_to(mul(gq, div(a, b)), b_shape));
        break;
      }
    }
    return {ga, gb};
  }
  std::string name() const override { return std::string(op_name(op)) + "Backward"; }
};

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_f32(a, name);
  check_f32(b, name);
  const Device device = dispatch::common_device(name, {&a, &b});
  Tensor out = empty(broadcast_shapes(a.shape(), b.shape(), name), DType::f32, device);
  if (out.numel() > 0) binary_into(op, a, b, out);
  if (auto node = autograd::make_node<BinaryBackward>({a, b})) {
    node->op = op;
    node->a_shape = a.shape();
    node->b_shape = b.shape();
    const bool mul_div = op == BinaryOp::kMul || op == BinaryOp::kDiv;
    if (mul_div && node->needs_grad(1)) node->a = a.detach();
    if ((op == BinaryOp::kMul && node->needs_grad(0)) || op == BinaryOp::kDiv) node->b = b.detach();
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t nd = std::max(a.size(), b.size());
  Shape out(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t da = i < nd - a.size() ? 1 : a[i - (nd - a.size())];
    const int64_t db = i < nd - b.size() ? 1 : b[i - (nd - b.size())];
    COHORT_CHECK_ARG(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ",
                     shape_str(b), " cannot be broadcast (dim ", int64_t(i) - int64_t(nd), ": ", da,
                     " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::kAdd, a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::kSub, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::kMul, a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::kDiv, a, b);
}

}  // namespace cohort::ops
