// softmax, log_softmax and the fused cross_entropy loss.
//
// The kernels work on rows; softmax over another dim moves that dim last (a permuted copy),
// runs the rows and moves it back. Backward reuses the forward output (softmax) or the per-row
// max and log-sum (cross_entropy), so no exp/max pass is repeated beyond one exp per element.
#include <algorithm>

#include "cohort/autograd/node.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/ops/checks.h"
#include "cohort/ops/ops.h"

namespace cohort::ops {
namespace {

// Dims of t in the order `order`, as a view.
Tensor permuted(const Tensor& t, const std::vector<int64_t>& order) {
  Shape s, st;
  for (int64_t d : order) {
    s.push_back(t.shape()[size_t(d)]);
    st.push_back(t.strides()[size_t(d)]);
  }
  return t.as_strided(s, st, t.offset());
}

// Row layout for softmax over `dim`: `to_last` moves dim to the end, `from_last` undoes it.
struct RowLayout {
  int64_t rows = 0, cols = 0;
  bool moved = false;
  std::vector<int64_t> to_last, from_last;

  RowLayout(const Tensor& x, int64_t dim, const char* op) {
    // A 0-dim tensor is one row of one element (torch allows dim 0 / -1 on it).
    const int64_t nd = std::max<int64_t>(x.dim(), 1);
    const int64_t d = normalize_dim(dim, nd, op);
    cols = x.dim() == 0 ? 1 : x.shape()[size_t(d)];
    rows = cols == 0 ? 0 : x.numel() / cols;
    moved = x.dim() > 0 && d != x.dim() - 1;
    if (!moved) return;
    for (int64_t i = 0; i < x.dim(); ++i)
      if (i != d) to_last.push_back(i);
    to_last.push_back(d);
    from_last.resize(to_last.size());
    for (size_t i = 0; i < to_last.size(); ++i) from_last[size_t(to_last[i])] = int64_t(i);
  }
  // t as contiguous [rows, cols] rows (a copy when the dim moved or t is strided).
  Tensor rows_of(const Tensor& t) const {
    return moved ? permuted(t, to_last).clone_raw() : t.contiguous_raw();
  }
  // A contiguous tensor of the original shape from the contiguous row-layout result.
  Tensor restore(const Tensor& r) const { return moved ? permuted(r, from_last).clone_raw() : r; }
};

using dispatch::KernelTable;
using RowGradKernel = decltype(KernelTable::softmax_backward_rows);

struct SoftmaxBackward : autograd::Node {
  RowLayout layout;
  Tensor y;  // forward output in row layout
  RowGradKernel kernel = nullptr;
  bool log = false;
  explicit SoftmaxBackward(RowLayout l) : layout(std::move(l)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = layout.rows_of(grads[0]);
    Tensor dx = empty(y.shape(), DType::f32, y.device());
    kernel(y.device(), y.data<float>(), g.data<float>(), layout.rows, layout.cols,
           dx.data<float>());
    return {layout.restore(dx)};
  }
  std::string name() const override { return log ? "LogSoftmaxBackward" : "SoftmaxBackward"; }
};

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  check_f32(x, op);
  RowLayout layout(x, dim, op);
  Tensor xr = layout.rows_of(x);
  const Device d = x.device();
  const KernelTable& k = dispatch::kernels_for(d);
  Tensor yr = empty(xr.shape(), DType::f32, d);
  dispatch::need(log ? k.log_softmax_rows : k.softmax_rows, op, d)(d, xr.data<float>(), layout.rows,
                                                                   layout.cols, yr.data<float>());
  Tensor out = layout.restore(yr);
  if (auto node = autograd::make_node<SoftmaxBackward>({x}, layout)) {
    node->y = yr.detach();
    node->kernel =
        dispatch::need(log ? k.log_softmax_backward_rows : k.softmax_backward_rows, op, d);
    node->log = log;
    autograd::set_history(out, node);
  }
  return out;
}

struct CrossEntropyBackward : autograd::Node {
  Tensor logits, targets, stats;  // contiguous [N, C], [N], [N, 2]
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const int64_t n = logits.size(0), c = logits.size(1);
    const Device d = logits.device();
    const float g = grads[0].item<float>();  // dL/dloss: the loss is one element
    Tensor dx = empty(logits.shape(), DType::f32, d);
    dispatch::need(dispatch::kernels_for(d).cross_entropy_backward, "cross_entropy backward", d)(
        d, logits.data<float>(), targets.data<int64_t>(), stats.data<float>(), n, c, g / float(n),
        dx.data<float>());
    return {dx, Tensor()};
  }
  std::string name() const override { return "CrossEntropyBackward"; }
};

void check_targets(const Tensor& logits, const Tensor& targets) {
  COHORT_CHECK_ARG(targets.defined(), "cross_entropy: targets is an undefined tensor");
  COHORT_CHECK_ARG(targets.dtype() == DType::i64,
                   "cross_entropy: targets must be int64 class indices, got ",
                   dtype_name(targets.dtype()), " of shape ", shape_str(targets.shape()));
  COHORT_CHECK_ARG(targets.dim() == 1 && targets.size(0) == logits.size(0),
                   "cross_entropy: targets ", shape_str(targets.shape()), " do not match logits ",
                   shape_str(logits.shape()), " (expected [", logits.size(0), "])");
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(x, dim, false);
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(x, dim, true);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  check_f32(logits, "cross_entropy");
  COHORT_CHECK_ARG(logits.dim() == 2, "cross_entropy: logits must be [N, C], got ",
                   shape_str(logits.shape()));
  check_targets(logits, targets);
  const int64_t n = logits.size(0), c = logits.size(1);
  const Device d = dispatch::common_device("cross_entropy", {&logits, &targets});
  Tensor x = logits.contiguous_raw(), t = targets.contiguous_raw();
  const Tensor t_host = t.to(Device::cpu());  // the range check reads every target
  const int64_t* tp = t_host.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    COHORT_CHECK_ARG(tp[i] >= 0 && tp[i] < c, "cross_entropy: target ", tp[i], " at position ", i,
                     " is out of range for ", c, " classes (logits ", shape_str(logits.shape()),
                     ")");
  Tensor stats = empty({n, 2}, DType::f32, d);
  const double total =
      dispatch::need(dispatch::kernels_for(d).cross_entropy_forward, "cross_entropy", d)(
          d, x.data<float>(), t.data<int64_t>(), n, c, stats.data<float>());
  // mean over N; NaN for N = 0, as torch
  Tensor out = full({}, total / double(n)).to(d);
  if (auto node = autograd::make_node<CrossEntropyBackward>({logits, targets})) {
    node->logits = x.detach();
    node->targets = t.detach();
    node->stats = stats;
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace cohort::ops
