// Shape ops: reshape, transpose/permute, slice, contiguous. Each returns a view that shares
// storage where the layout allows (reshape copies a non-contiguous input, as torch.reshape).
#include <numeric>

#include "cohort/autograd/node.h"
#include "cohort/ops/ops.h"

namespace cohort::ops {
namespace {

Shape infer_shape(const Shape& want, int64_t numel, const Shape& from) {
  Shape s = want;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      COHORT_CHECK_ARG(infer_at < 0, "reshape: more than one -1 in ", shape_str(want));
      infer_at = int64_t(i);
    } else {
      COHORT_CHECK_ARG(s[i] >= 0, "reshape: negative dimension in ", shape_str(want));
      known *= s[i];
    }
  }
  if (infer_at >= 0) {
    COHORT_CHECK_ARG(known > 0 && numel % known == 0, "reshape: cannot reshape ", shape_str(from),
                     " into ", shape_str(want));
    s[size_t(infer_at)] = numel / known;
  }
  COHORT_CHECK_ARG(shape_numel(s) == numel, "reshape: cannot reshape ", shape_str(from), " (",
                   numel, " elements) into ", shape_str(want), " (", shape_numel(s), ")");
  return s;
}

Tensor view_contiguous(const Tensor& x, const Shape& s) {
  return x.as_strided(s, contiguous_strides(s), x.offset());
}

struct ReshapeBackward : autograd::Node {
  Shape in_shape;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    return {view_contiguous(g[0].contiguous_raw(), in_shape)};
  }
  std::string name() const override { return "ReshapeBackward"; }
};

struct PermuteBackward : autograd::Node {
  std::vector<int64_t> inverse;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor& t = g[0];
    Shape s(inverse.size()), st(inverse.size());
    for (size_t i = 0; i < inverse.size(); ++i) {
      s[i] = t.shape()[size_t(inverse[i])];
      st[i] = t.strides()[size_t(inverse[i])];
    }
    return {t.as_strided(s, st, t.offset())};
  }
  std::string name() const override { return "PermuteBackward"; }
};

struct SliceBackward : autograd::Node {
  Shape in_shape;
  int64_t dim = 0, start = 0, step = 1;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor out = zeros(in_shape, DType::f32, g[0].device());
    Shape st = out.strides();
    int64_t off = start * st[size_t(dim)];
    st[size_t(dim)] *= step;
    out.as_strided(g[0].shape(), st, off).copy_(g[0]);
    return {out};
  }
  std::string name() const override { return "SliceBackward"; }
};

struct IdentityBackward : autograd::Node {
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override { return {g[0]}; }
  std::string name() const override { return "ContiguousBackward"; }
};

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape s = infer_shape(shape, x.numel(), x.shape());
  Tensor out = view_contiguous(x.contiguous_raw(), s);
  if (auto n = autograd::make_node<ReshapeBackward>({x})) {
    n->in_shape = x.shape();
    autograd::set_history(out, n);
  }
  return out;
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  int64_t nd = x.dim();
  COHORT_CHECK_ARG(int64_t(dims.size()) == nd, "permute: ", dims.size(),
                   " dims given for a tensor of shape ", shape_str(x.shape()));
  std::vector<int64_t> inverse(size_t(nd), -1);
  Shape s(static_cast<size_t>(nd)), st(static_cast<size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = normalize_dim(dims[size_t(i)], nd, "permute");
    COHORT_CHECK_ARG(inverse[size_t(d)] < 0, "permute: dim ", d, " repeated");
    inverse[size_t(d)] = i;
    s[size_t(i)] = x.shape()[size_t(d)];
    st[size_t(i)] = x.strides()[size_t(d)];
  }
  Tensor out = x.as_strided(s, st, x.offset());
  if (auto n = autograd::make_node<PermuteBackward>({x})) {
    n->inverse = inverse;
    autograd::set_history(out, n);
  }
  return out;
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  std::vector<int64_t> dims(size_t(x.dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[size_t(normalize_dim(d0, x.dim(), "transpose"))],
            dims[size_t(normalize_dim(d1, x.dim(), "transpose"))]);
  return permute(x, dims);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  int64_t d = normalize_dim(dim, x.dim(), "slice");
  int64_t n = x.shape()[size_t(d)];
  COHORT_CHECK_ARG(step > 0, "slice: step must be positive, got ", step);
  if (start < 0) start += n;
  if (end < 0) end += n;
  end = std::min(end, n);
  COHORT_CHECK_ARG(start >= 0 && start <= end, "slice: range [", start, ", ", end,
                   ") invalid for dim ", d, " of size ", n);
  Shape s = x.shape(), st = x.strides();
  s[size_t(d)] = (end - start + step - 1) / step;
  st[size_t(d)] *= step;
  Tensor out = x.as_strided(s, st, x.offset() + start * x.strides()[size_t(d)]);
  if (auto node = autograd::make_node<SliceBackward>({x})) {
    node->in_shape = x.shape();
    node->dim = d;
    node->start = start;
    node->step = step;
    autograd::set_history(out, node);
  }
  return out;
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = x.clone_raw();
  if (auto n = autograd::make_node<IdentityBackward>({x})) autograd::set_history(out, n);
  return out;
}

}  // namespace cohort::ops

namespace cohort {

Tensor Tensor::reshape(const Shape& s) const {
  return ops::reshape(*this, s);
}
Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  return ops::transpose(*this, d0, d1);
}
Tensor Tensor::permute(const std::vector<int64_t>& d) const {
  return ops::permute(*this, d);
}
Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  return ops::slice(*this, dim, start, end, step);
}
Tensor Tensor::contiguous() const {
  return ops::contiguous(*this);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  int64_t a = normalize_dim(start_dim, dim(), "flatten");
  int64_t b = normalize_dim(end_dim, dim(), "flatten");
  COHORT_CHECK_ARG(a <= b, "flatten: start_dim ", start_dim, " after end_dim ", end_dim);
  Shape s(shape().begin(), shape().begin() + a);
  int64_t m = 1;
  for (int64_t i = a; i <= b; ++i) m *= shape()[size_t(i)];
  s.push_back(m);
  s.insert(s.end(), shape().begin() + b + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  int64_t n = normalize_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape();
  s.insert(s.begin() + n, 1);
  return reshape(s);
}

Tensor Tensor::squeeze(int64_t d) const {
  int64_t n = normalize_dim(d, dim(), "squeeze");
  if (shape()[size_t(n)] != 1) return *this;
  Shape s = shape();
  s.erase(s.begin() + n);
  return reshape(s);
}

}  // namespace cohort
