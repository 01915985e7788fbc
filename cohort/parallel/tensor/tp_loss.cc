// vocab_parallel_cross_entropy (Megatron-LM's vocab_parallel_cross_entropy): the loss of logits
// split along the vocabulary, without gathering the [N, V] logits. Per row i, over the group:
//   m_i = allreduce-max of the local maxima              (a stable shift, as in softmax)
//   s_i = allreduce-sum of sum_j exp(x_ij - m_i)
//   z_i = allreduce-sum of the target's logit (only its owner contributes it)
//   loss = mean_i (log s_i + m_i - z_i)
// s and z travel in one allreduce. All three are identical on every rank, so the loss is too.
#include <cmath>

#include "cohort/autograd/node.h"
#include "cohort/core/error.h"
#include "cohort/parallel/tensor/tensor_parallel.h"

namespace cohort::parallel {
namespace {

// What one rank's rows look like: x [n, v] (this rank's classes [lo, lo + v)), targets [n].
struct Rows {
  Tensor x, targets;  // contiguous
  int64_t n = 0, v = 0, lo = 0;
};

struct VocabParallelCrossEntropyBackward : autograd::Node {
  Rows rows;
  Shape shape;       // the logits' ([..., v]): the gradient's
  Tensor max, sums;  // [n], [2n]: the shift and (s, z) per row
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const int64_t n = rows.n, v = rows.v;
    const float scale = *grads[0].data<float>() / float(n);
    const float *x = rows.x.data<float>(), *m = max.data<float>(), *s = sums.data<float>();
    const int64_t* t = rows.targets.data<int64_t>();
    Tensor dx = empty(shape);  // row-major: row i at i * v
    float* d = dx.data<float>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < v; ++j) {
        const float p = std::exp(x[i * v + j] - m[i]) / s[i];
        d[i * v + j] = (p - (t[i] == rows.lo + j ? 1.0f : 0.0f)) * scale;
      }
    return {dx, Tensor()};
  }
  std::string name() const override { return "VocabParallelCrossEntropyBackward"; }
};

Rows rows_of(const Tensor& logits, const Tensor& targets, const comm::ProcessGroup& g) {
  COHORT_CHECK_ARG(logits.defined() && logits.dtype() == DType::f32 && logits.dim() >= 2,
                   "vocab_parallel_cross_entropy: logits must be float32 [..., V / ", g.size(),
                   "], got ", logits.defined() ? shape_str(logits.shape()) : "undefined");
  Shape lead(logits.shape().begin(), logits.shape().end() - 1);
  COHORT_CHECK_ARG(targets.defined() && targets.dtype() == DType::i64 && targets.shape() == lead,
                   "vocab_parallel_cross_entropy: logits ", shape_str(logits.shape()),
                   " need int64 targets ", shape_str(lead), ", got ",
                   targets.defined() ? shape_str(targets.shape()) : "undefined");
  Rows r;
  r.v = logits.size(-1);
  r.n = r.v == 0 ? 0 : logits.numel() / r.v;
  r.lo = g.rank() * r.v;
  r.x = logits.contiguous_raw().detach();  // saved by the node: no history
  r.targets = targets.contiguous_raw().detach();
  const int64_t vocab = r.v * g.size();
  const int64_t* t = r.targets.data<int64_t>();
  for (int64_t i = 0; i < r.n; ++i)
    COHORT_CHECK_ARG(t[i] >= 0 && t[i] < vocab, "vocab_parallel_cross_entropy: target ", t[i],
                     " at position ", i, " is out of range for ", vocab, " classes (", g.size(),
                     " shards of ", r.v, ")");
  return r;
}

// Per row, the max over the whole vocabulary.
Tensor global_max(const Rows& r, comm::ProcessGroup& g) {
  Tensor m = full({r.n}, -INFINITY);
  float* mp = m.data<float>();
  const float* x = r.x.data<float>();
  for (int64_t i = 0; i < r.n; ++i)
    for (int64_t j = 0; j < r.v; ++j) mp[i] = std::max(mp[i], x[i * r.v + j]);
  allreduce_(m, g, comm::ReduceOp::max);
  return m;
}

// [2n]: per row the exp-sum over the whole vocabulary, then the target's logit.
Tensor global_sums(const Rows& r, const Tensor& max, comm::ProcessGroup& g) {
  Tensor s = zeros({2 * r.n});
  float* sp = s.data<float>();
  const float *x = r.x.data<float>(), *m = max.data<float>();
  const int64_t* t = r.targets.data<int64_t>();
  for (int64_t i = 0; i < r.n; ++i) {
    double acc = 0;
    for (int64_t j = 0; j < r.v; ++j) acc += std::exp(double(x[i * r.v + j] - m[i]));
    sp[i] = float(acc);
    if (t[i] >= r.lo && t[i] < r.lo + r.v) sp[r.n + i] = x[i * r.v + (t[i] - r.lo)];
  }
  allreduce_(s, g, comm::ReduceOp::sum);
  return s;
}

}  // namespace

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets,
                                    const GroupPtr& group) {
  COHORT_CHECK_ARG(group != nullptr, "vocab_parallel_cross_entropy: the group is null");
  Rows r = rows_of(logits, targets, *group);
  Tensor max = global_max(r, *group);
  Tensor sums = global_sums(r, max, *group);
  const float *m = max.data<float>(), *s = sums.data<float>();
  double total = 0;
  for (int64_t i = 0; i < r.n; ++i)
    total += std::log(double(s[i])) + double(m[i]) - double(s[r.n + i]);
  Tensor out = full({}, total / double(r.n));  // NaN for N = 0, as nn::cross_entropy
  if (auto node = autograd::make_node<VocabParallelCrossEntropyBackward>({logits, targets})) {
    node->rows = std::move(r);
    node->shape = logits.shape();
    node->max = max;
    node->sums = sums;
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace cohort::parallel
