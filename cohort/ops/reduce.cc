// Reductions: sum, mean, max, argmax, sum_to.
//
// Every reduction is planned as [outer, r, inner] over a contiguous tensor (kernels/cpu/
// reduce.h). When the reduced dims form one block (ignoring size-1 dims), that is a view of
// the input; otherwise the input is permuted so that the reduced dims come last and copied.
#include <algorithm>

#include "cohort/autograd/node.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/ops/checks.h"
#include "cohort/ops/ops.h"

namespace cohort::ops {
namespace {

std::string dims_str(const std::vector<int64_t>& dims) {
  return shape_str(dims);
}

struct Plan {
  Shape in_shape;
  Shape keep_shape;  // the input shape with reduced dims set to 1
  Shape out_shape;   // keep_shape, or without the reduced dims when !keepdim
  std::vector<bool> reduced;
  bool block = true;          // reduced dims are one block of the contiguous input
  std::vector<int64_t> perm;  // otherwise: kept dims, then reduced dims
  int64_t outer = 1, r = 1, inner = 1;
};

Plan plan_reduce(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim,
                 const char* op) {
  const int64_t nd = int64_t(shape.size());
  Plan p;
  p.in_shape = shape;
  p.reduced.assign(size_t(nd), dims.empty());
  for (int64_t d : dims) {
    const int64_t n = normalize_dim(d, nd, op);
    COHORT_CHECK_ARG(!p.reduced[size_t(n)], op, ": dim ", d, " repeated in ", dims_str(dims),
                     " for a tensor of shape ", shape_str(shape));
    p.reduced[size_t(n)] = true;
  }
  int64_t lo = nd, hi = -1;
  for (int64_t i = 0; i < nd; ++i) {
    const size_t u = size_t(i);
    p.keep_shape.push_back(p.reduced[u] ? 1 : shape[u]);
    if (!p.reduced[u] || keepdim) p.out_shape.push_back(p.reduced[u] ? 1 : shape[u]);
    if (p.reduced[u]) lo = std::min(lo, i), hi = std::max(hi, i);
  }
  for (int64_t i = lo; i <= hi; ++i)
    if (!p.reduced[size_t(i)] && shape[size_t(i)] != 1) p.block = false;
  if (p.block) {
    for (int64_t i = 0; i < nd; ++i) {
      int64_t& f = i < lo ? p.outer : (i <= hi ? p.r : p.inner);
      f *= shape[size_t(i)];
    }
    return p;
  }
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t i = 0; i < nd; ++i)
      if (p.reduced[size_t(i)] == (pass == 1)) p.perm.push_back(i);
  for (int64_t i = 0; i < nd; ++i) (p.reduced[size_t(i)] ? p.r : p.outer) *= shape[size_t(i)];
  return p;
}

// The input laid out as [outer, r, inner], contiguous.
Tensor arrange(const Tensor& x, const Plan& p) {
  if (p.block) return x.contiguous_raw();
  Shape s, st;
  for (int64_t d : p.perm) {
    s.push_back(x.shape()[size_t(d)]);
    st.push_back(x.strides()[size_t(d)]);
  }
  return x.as_strided(s, st, x.offset()).clone_raw();
}

// g (the shape of the reduction's output) * scale, repeated over the reduced dims.
Tensor expand_back(const Tensor& grad, const Plan& p, float scale) {
  Tensor out = empty(p.in_shape, DType::f32, grad.device());
  if (out.numel() == 0) return out;
  Tensor g = grad.contiguous_raw();
  if (p.block) {
    const Device d = g.device();
    dispatch::need(dispatch::kernels_for(d).broadcast_middle, "sum backward", d)(
        d, g.data<float>(), p.outer, p.r, p.inner, scale, out.data<float>());
    return out;
  }
  if (scale != 1.0f) g = mul_scalar(g, scale);
  Shape st = contiguous_strides(p.keep_shape);
  for (size_t i = 0; i < st.size(); ++i)
    if (p.reduced[i]) st[i] = 0;
  out.copy_(g.as_strided(p.in_shape, st, g.offset()));
  return out;
}

struct SumBackward : autograd::Node {
  Plan plan;
  float scale = 1;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {expand_back(grads[0], plan, scale)};
  }
  std::string name() const override { return scale == 1.0f ? "SumBackward" : "MeanBackward"; }
};

Tensor reduce_sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool mean) {
  const char* op = mean ? "mean" : "sum";
  check_f32(x, op);
  Plan p = plan_reduce(x.shape(), dims, keepdim, op);
  Tensor src = arrange(x, p);
  const Device d = x.device();
  const dispatch::KernelTable& k = dispatch::kernels_for(d);
  Tensor out = empty(p.out_shape, DType::f32, d);
  float* o = out.data<float>();
  dispatch::need(k.sum_middle, op, d)(d, src.data<float>(), p.outer, p.r, p.inner, o);
  // mean of nothing is NaN (0 * inf), as torch.
  const float scale = mean ? float(1.0 / double(p.r)) : 1.0f;
  if (mean) k.affine(d, o, scale, 0.0f, o, out.numel());
  if (auto node = autograd::make_node<SumBackward>({x})) {
    node->plan = std::move(p);
    node->scale = scale;
    autograd::set_history(out, node);
  }
  return out;
}

// x as [outer, r, inner] around dim d, plus the shape of the result.
struct DimPlan {
  int64_t outer = 1, r = 1, inner = 1;
  Shape out_shape;
};

DimPlan plan_dim(const Tensor& x, int64_t dim, bool keepdim, const char* op) {
  check_f32(x, op);
  const int64_t d = normalize_dim(dim, x.dim(), op);
  DimPlan p;
  for (int64_t i = 0; i < x.dim(); ++i) {
    const int64_t n = x.shape()[size_t(i)];
    (i < d ? p.outer : (i == d ? p.r : p.inner)) *= n;
    if (i != d || keepdim) p.out_shape.push_back(i == d ? 1 : n);
  }
  COHORT_CHECK_ARG(p.r > 0, op, ": cannot reduce over dim ", dim, " of size 0 (shape ",
                   shape_str(x.shape()), ")");
  return p;
}

struct MaxBackward : autograd::Node {
  Tensor idx;  // int64, [outer, inner]
  Shape in_shape;
  int64_t outer = 1, r = 1, inner = 1;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0].contiguous_raw();
    const Device d = g.device();
    Tensor dx = empty(in_shape, DType::f32, d);
    dispatch::need(dispatch::kernels_for(d).max_middle_backward, "max backward", d)(
        d, g.data<float>(), idx.data<int64_t>(), outer, r, inner, dx.data<float>());
    return {dx};
  }
  std::string name() const override { return "MaxBackward"; }
};

// Max over the plan's middle dim and the first position holding it, on x's device.
std::pair<Tensor, Tensor> max_values_and_positions(const Tensor& x, const DimPlan& p,
                                                   const char* op) {
  const Device d = x.device();
  Tensor xc = x.contiguous_raw();
  Tensor val = empty(p.out_shape, DType::f32, d), idx = empty(p.out_shape, DType::i64, d);
  dispatch::need(dispatch::kernels_for(d).max_middle, op, d)(
      d, xc.data<float>(), p.outer, p.r, p.inner, val.data<float>(), idx.data<int64_t>());
  return {val, idx};
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce_sum(x, dims, keepdim, false);
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce_sum(x, dims, keepdim, true);
}

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  DimPlan p = plan_dim(x, dim, keepdim, "max");
  auto [val, idx] = max_values_and_positions(x, p, "max");
  if (auto node = autograd::make_node<MaxBackward>({x})) {
    node->idx = idx;
    node->in_shape = x.shape();
    node->outer = p.outer;
    node->r = p.r;
    node->inner = p.inner;
    autograd::set_history(val, node);
  }
  return val;
}

Tensor argmax(const Tensor& x, int64_t dim) {
  DimPlan p = plan_dim(x, dim, false, "argmax");
  return max_values_and_positions(x, p, "argmax").second;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const Shape& gs = g.shape();
  const int64_t lead = int64_t(gs.size()) - int64_t(shape.size());
  if (lead < 0) {
    // The target has extra leading dims: fine when they are all 1 (g [3] -> [1, 3]).
    Shape ones_first(size_t(-lead), 1);
    bool all_one = true;
    for (int64_t i = 0; i < -lead; ++i) all_one = all_one && shape[size_t(i)] == 1;
    COHORT_CHECK_ARG(all_one, "sum_to: cannot sum a tensor of shape ", shape_str(gs), " to ",
                     shape_str(shape));
    ones_first.insert(ones_first.end(), gs.begin(), gs.end());
    return sum_to(reshape(g, ones_first), shape);
  }
  bool ok = true;
  std::vector<int64_t> dims;
  for (int64_t i = 0; ok && i < int64_t(gs.size()); ++i) {
    if (i < lead) {
      dims.push_back(i);
      continue;
    }
    const int64_t want = shape[size_t(i - lead)];
    if (want == gs[size_t(i)]) continue;
    ok = want == 1;
    dims.push_back(i);
  }
  COHORT_CHECK_ARG(ok, "sum_to: cannot sum a tensor of shape ", shape_str(gs), " down to ",
                   shape_str(shape));
  if (dims.empty()) return reshape(g, shape);  // only leading dims of size 1 differ
  return reshape(sum(g, dims, true), shape);
}

}  // namespace cohort::ops
