#include "cohort/nn/shard.h"

#include "cohort/autograd/node.h"
#include "cohort/core/error.h"
#include "cohort/ops/ops.h"

namespace cohort::nn {
namespace {

void check_spec(const Shape& shape, const ShardSpec& s) {
  COHORT_CHECK_ARG(s.dim >= 0 && s.dim < int64_t(shape.size()) && s.parts >= 1 && s.shards >= 1 &&
                       s.index >= 0 && s.index < s.shards,
                   "ShardSpec: dim ", s.dim, ", parts ", s.parts, ", shards ", s.shards, ", index ",
                   s.index, " does not fit a tensor of shape ", shape_str(shape));
}

}  // namespace

Shape full_shape(const Shape& local, const ShardSpec& s) {
  check_spec(local, s);
  Shape full = local;
  full[size_t(s.dim)] *= s.shards;
  return full;
}

std::vector<int64_t> full_indices(const Shape& local, const ShardSpec& s) {
  const Shape full = full_shape(local, s);
  int64_t inner = 1;  // elements per step of `dim`
  for (size_t d = size_t(s.dim) + 1; d < local.size(); ++d) inner *= local[d];
  int64_t outer = 1;
  for (size_t d = 0; d < size_t(s.dim); ++d) outer *= local[d];
  const int64_t local_len = local[size_t(s.dim)], full_len = full[size_t(s.dim)];
  const int64_t piece = local_len / s.parts, block = full_len / s.parts;
  std::vector<int64_t> out;
  out.reserve(size_t(outer * local_len * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < local_len; ++j) {
      // Row j of the piece is row (j % piece) of block (j / piece)'s piece `index`.
      const int64_t row = (j / piece) * block + s.index * piece + j % piece;
      for (int64_t i = 0; i < inner; ++i) out.push_back((o * full_len + row) * inner + i);
    }
  return out;
}

Tensor take_shard(const Tensor& full, const ShardSpec& s) {
  check_spec(full.shape(), s);
  const int64_t len = full.size(s.dim);
  COHORT_CHECK_ARG(len % (s.parts * s.shards) == 0, "ShardSpec: dimension ", s.dim, " of ",
                   shape_str(full.shape()), " does not divide into ", s.parts, " part(s) of ",
                   s.shards, " shards");
  autograd::NoGradGuard no_grad;
  const int64_t block = len / s.parts, piece = block / s.shards;
  std::vector<Tensor> slices;
  for (int64_t p = 0; p < s.parts; ++p) {
    const int64_t lo = p * block + s.index * piece;
    slices.push_back(full.slice(s.dim, lo, lo + piece));
  }
  return ops::concat(slices, s.dim).contiguous();
}

Tensor join_shards(const std::vector<Tensor>& pieces, const ShardSpec& s) {
  COHORT_CHECK_ARG(int64_t(pieces.size()) == s.shards, "join_shards: ", pieces.size(),
                   " pieces for ", s.shards, " shards");
  autograd::NoGradGuard no_grad;
  const int64_t piece = pieces[0].size(s.dim) / s.parts;
  std::vector<Tensor> slices;
  for (int64_t p = 0; p < s.parts; ++p)
    for (const Tensor& t : pieces) slices.push_back(t.slice(s.dim, p * piece, (p + 1) * piece));
  return ops::concat(slices, s.dim).contiguous();
}

}  // namespace cohort::nn
