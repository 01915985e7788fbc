#include "cohort/parallel/tensor/tensor_parallel.h"

#include "cohort/core/error.h"
#include "cohort/ops/ops.h"

namespace cohort::parallel {
namespace {

const GroupPtr& checked(const GroupPtr& group, const char* layer) {
  COHORT_CHECK_ARG(group != nullptr, layer, ": the tensor-parallel group is null");
  return group;
}

nn::ShardSpec spec_of(int64_t dim, int64_t parts, const comm::ProcessGroup& g) {
  return {.dim = dim, .parts = parts, .shards = g.size(), .index = g.rank()};
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out, int64_t parts, bool bias,
                                           GroupPtr group)
    : in_(in), out_(out), group_(std::move(group)) {
  const int64_t c = checked(group_, "ColumnParallelLinear")->size();
  COHORT_CHECK_ARG(in > 0 && out > 0 && parts > 0 && out % (parts * c) == 0,
                   "ColumnParallelLinear: out features ", out, " must divide into ", parts,
                   " part(s) of ", c, " shards (in ", in, ")");
  const nn::ShardSpec spec = spec_of(0, parts, *group_);
  const nn::Init rule = nn::Init::fan_in_uniform(in);  // the unsharded layer's fan-in
  weight_ = register_parameter("weight", empty({out / c, in}), rule, spec);
  if (bias) bias_ = register_parameter("bias", empty({out / c}), rule, spec);
  reset_parameters(0);
}

Tensor ColumnParallelLinear::forward(const Tensor& x) {
  COHORT_CHECK_ARG(x.dim() >= 1 && x.size(-1) == in_, "ColumnParallelLinear(", in_, " -> ", out_,
                   "): input ", shape_str(x.shape()), " must end in ", in_, " features");
  return ops::linear(copy_to_group(x, group_), weight_, bias_);
}

RowParallelLinear::RowParallelLinear(int64_t in, int64_t out, bool bias, GroupPtr group)
    : in_(in), out_(out), group_(std::move(group)) {
  const int64_t c = checked(group_, "RowParallelLinear")->size();
  COHORT_CHECK_ARG(in > 0 && out > 0 && in % c == 0, "RowParallelLinear: in features ", in,
                   " must divide into ", c, " shards (out ", out, ")");
  const nn::Init rule = nn::Init::fan_in_uniform(in);
  weight_ = register_parameter("weight", empty({out, in / c}), rule, spec_of(1, 1, *group_));
  // Replicated: added once after the sum, so every rank holds all of it.
  if (bias) bias_ = register_parameter("bias", empty({out}), rule);
  reset_parameters(0);
}

Tensor RowParallelLinear::forward(const Tensor& x) {
  const int64_t local = in_ / group_->size();
  COHORT_CHECK_ARG(x.dim() >= 1 && x.size(-1) == local, "RowParallelLinear(", in_, " -> ", out_,
                   "): input ", shape_str(x.shape()), " must end in this rank's ", local,
                   " of the ", in_, " features");
  Tensor y = reduce_from_group(ops::linear(x, weight_), group_);
  return bias_.defined() ? y + bias_ : y;
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t num, int64_t dim, GroupPtr group)
    : num_(num), dim_(dim), group_(std::move(group)) {
  const int64_t c = checked(group_, "VocabParallelEmbedding")->size();
  COHORT_CHECK_ARG(num > 0 && dim > 0 && num % c == 0, "VocabParallelEmbedding: ", num,
                   " embeddings must divide into ", c, " shards (dim ", dim, ")");
  weight_ = register_parameter("weight", empty({num / c, dim}), nn::Init::normal(0.0, 1.0),
                               spec_of(0, 1, *group_));
  reset_parameters(0);
}

Tensor VocabParallelEmbedding::forward(const Tensor& ids) {
  COHORT_CHECK_ARG(ids.dtype() == DType::i64, "VocabParallelEmbedding(", num_, ", ", dim_,
                   "): ids must be int64, got ", dtype_name(ids.dtype()));
  const int64_t rows = num_ / group_->size(), lo = group_->rank() * rows;
  std::vector<int64_t> all = ids.to_vector<int64_t>();
  std::vector<int64_t> local(all.size());
  std::vector<float> keep(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    COHORT_CHECK_ARG(all[i] >= 0 && all[i] < num_, "VocabParallelEmbedding: id ", all[i],
                     " at position ", i, " is outside [0, ", num_, ")");
    const bool mine = all[i] >= lo && all[i] < lo + rows;
    local[i] = mine ? all[i] - lo : 0;  // any valid row; zeroed by `keep`
    keep[i] = mine ? 1.0f : 0.0f;
  }
  Shape mask_shape = ids.shape();
  mask_shape.push_back(1);
  // The mask also zeroes the gradient those borrowed rows would get.
  Tensor part =
      ops::embedding(weight_, from_vector_i64(local, ids.shape())) * from_vector(keep, mask_shape);
  return reduce_from_group(part, group_);
}

TensorParallelLayers::TensorParallelLayers(GroupPtr group)
    : group_(checked(group, "TensorParallelLayers")) {}

std::shared_ptr<nn::Module> TensorParallelLayers::column(int64_t in, int64_t out, int64_t parts,
                                                         bool bias) {
  return std::make_shared<ColumnParallelLinear>(in, out, parts, bias, group_);
}
std::shared_ptr<nn::Module> TensorParallelLayers::row(int64_t in, int64_t out, bool bias) {
  return std::make_shared<RowParallelLinear>(in, out, bias, group_);
}
std::shared_ptr<nn::Module> TensorParallelLayers::embedding(int64_t num, int64_t dim) {
  return std::make_shared<VocabParallelEmbedding>(num, dim, group_);
}
Tensor TensorParallelLayers::cross_entropy(const Tensor& logits, const Tensor& targets) {
  return vocab_parallel_cross_entropy(logits, targets, group_);
}
Tensor TensorParallelLayers::full_logits(const Tensor& logits) {
  return gather_from_group(logits, group_);
}

}  // namespace cohort::parallel
