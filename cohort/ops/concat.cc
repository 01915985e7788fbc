// concat and split: inverse shape ops along one dim. concat copies (a memcpy per input and
// outer index when the inputs are contiguous); split returns views, all outputs of one node.
// Each one's backward is the other: concat's gradient is split into views of the incoming
// gradient, and split's gradients are concatenated (an unused output contributes zeros).
#include <cstring>

#include "cohort/autograd/node.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/ops/checks.h"
#include "cohort/ops/ops.h"

namespace cohort::ops {
namespace {

// The slice [start, start + len) of dim d of t, as a view.
Tensor narrow(const Tensor& t, int64_t d, int64_t start, int64_t len) {
  Shape s = t.shape();
  s[size_t(d)] = len;
  return t.as_strided(s, t.strides(), t.offset() + start * t.strides()[size_t(d)]);
}

// On a device: each part copied into its slice there (the device scatters into the view); an
// undefined part's slice gets zeros made on the device.
void write_parts_on_device(Tensor& out, const std::vector<Tensor>& parts,
                           const std::vector<int64_t>& sizes, int64_t d) {
  int64_t start = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    Tensor slice = narrow(out, d, start, sizes[k]);
    start += sizes[k];
    if (slice.numel() == 0) continue;
    slice.copy_(parts[k].defined() ? parts[k] : zeros(slice.shape(), out.dtype(), out.device()));
  }
}

// Writes parts[i] into consecutive slices of dim d of out (contiguous); an undefined part
// (a split output that got no gradient) leaves its slice zero.
void write_parts(Tensor& out, const std::vector<Tensor>& parts, const std::vector<int64_t>& sizes,
                 int64_t d) {
  if (!out.device().is_cpu()) return write_parts_on_device(out, parts, sizes, d);
  const Shape& os = out.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < int64_t(os.size()); ++i)
    (i < d ? outer : inner) *= i == d ? 1 : os[size_t(i)];
  const size_t esize = dtype_size(out.dtype());
  char* base = static_cast<char*>(out.raw_data());
  const int64_t row = os[size_t(d)] * inner;  // elements of out per outer index
  int64_t start = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const Tensor& p = parts[k];
    const int64_t chunk = sizes[k] * inner;
    if (chunk > 0 && outer > 0) {
      if (!p.defined()) {
        for (int64_t o = 0; o < outer; ++o)
          std::memset(base + size_t(o * row + start) * esize, 0, size_t(chunk) * esize);
      } else if (p.is_contiguous() && p.dtype() == out.dtype()) {
        const char* src = static_cast<const char*>(p.raw_data());
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(base + size_t(o * row + start) * esize, src + size_t(o * chunk) * esize,
                      size_t(chunk) * esize);
      } else {
        narrow(out, d, start / inner, sizes[k]).copy_(p);
      }
    }
    start += chunk;
  }
}

struct ConcatBackward : autograd::Node {
  std::vector<int64_t> sizes;
  int64_t dim = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> out(sizes.size());
    int64_t start = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (needs_grad(k)) out[k] = narrow(grads[0], dim, start, sizes[k]);
      start += sizes[k];
    }
    return out;
  }
  std::string name() const override { return "ConcatBackward"; }
};

struct SplitBackward : autograd::Node {
  Shape in_shape;
  Device device;
  std::vector<int64_t> sizes;
  int64_t dim = 0;
  explicit SplitBackward(uint32_t outputs) : Node(outputs) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor dx = empty(in_shape, DType::f32, device);
    write_parts(dx, grads, sizes, dim);
    return {dx};
  }
  std::string name() const override { return "SplitBackward"; }
};

}  // namespace

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  COHORT_CHECK_ARG(!xs.empty(), "concat: needs at least one tensor");
  for (size_t k = 0; k < xs.size(); ++k)
    COHORT_CHECK_ARG(xs[k].defined(), "concat: tensor ", k, " is undefined");
  const Tensor& x0 = xs[0];
  COHORT_CHECK_ARG(x0.dim() > 0, "concat: cannot concatenate 0-dim tensors");
  const int64_t d = normalize_dim(dim, x0.dim(), "concat");
  Shape out_shape = x0.shape();
  out_shape[size_t(d)] = 0;
  std::vector<int64_t> sizes;
  for (size_t k = 0; k < xs.size(); ++k) {
    const Tensor& x = xs[k];
    COHORT_CHECK_ARG(x.dtype() == x0.dtype(), "concat: tensor ", k, " has dtype ",
                     dtype_name(x.dtype()), " but tensor 0 has ", dtype_name(x0.dtype()));
    bool match = x.dim() == x0.dim();
    for (int64_t i = 0; match && i < x.dim(); ++i)
      match = i == d || x.shape()[size_t(i)] == x0.shape()[size_t(i)];
    COHORT_CHECK_ARG(match, "concat: tensor ", k, " has shape ", shape_str(x.shape()),
                     " but tensor 0 has ", shape_str(x0.shape()), " (all dims but ", d,
                     " must match)");
    sizes.push_back(x.shape()[size_t(d)]);
    out_shape[size_t(d)] += sizes.back();
  }
  for (size_t k = 1; k < xs.size(); ++k) dispatch::common_device("concat", {&x0, &xs[k]});
  Tensor out = empty(out_shape, x0.dtype(), x0.device());
  write_parts(out, xs, sizes, d);
  if (auto node = autograd::make_node_n<ConcatBackward>(xs)) {
    node->sizes = sizes;
    node->dim = d;
    autograd::set_history(out, node);
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  COHORT_CHECK_ARG(x.defined(), "split: input is an undefined tensor");
  COHORT_CHECK_ARG(x.dim() > 0, "split: cannot split a 0-dim tensor");
  const int64_t d = normalize_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    COHORT_CHECK_ARG(s >= 0, "split: negative size ", s, " in ", shape_str(sizes));
    total += s;
  }
  COHORT_CHECK_ARG(total == x.shape()[size_t(d)], "split: sizes ", shape_str(sizes), " sum to ",
                   total, " but dim ", d, " of ", shape_str(x.shape()), " has size ",
                   x.shape()[size_t(d)]);
  COHORT_CHECK_ARG(!sizes.empty(), "split: needs at least one size");
  std::vector<Tensor> outs;
  int64_t start = 0;
  for (int64_t s : sizes) {
    outs.push_back(narrow(x, d, start, s));
    start += s;
  }
  if (auto node = autograd::make_node<SplitBackward>({x}, uint32_t(sizes.size()))) {
    node->in_shape = x.shape();
    node->device = x.device();
    node->sizes = sizes;
    node->dim = d;
    for (size_t k = 0; k < outs.size(); ++k) autograd::set_history(outs[k], node, uint32_t(k));
  }
  return outs;
}

}  // namespace cohort::ops
