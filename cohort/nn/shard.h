#pragma once
// ShardSpec: how a parameter one rank holds maps into the unsharded tensor (tensor parallelism,
// parallel/tensor/tensor_parallel.h). The full tensor's dimension `dim` is cut into `parts` equal
// blocks (a fused qkv projection's q, k and v: 3; otherwise 1) and each block into `shards`
// equal pieces; the rank holds piece `index` of every block, side by side along `dim`:
//
//   full qkv.weight [3C, C], parts 3, shards 2, index 1:   local [3C/2, C] = q1 ; k1 ; v1
//
// One description serves initialisation (a shard is filled with exactly its slice of the full
// tensor's draw, so a sharded model starts where the unsharded one does), checkpoints (pieces
// are joined into the full tensor, and cut again at load for any number of shards) and memory
// accounting.
#include <cstdint>
#include <vector>

#include "cohort/tensor/tensor.h"

namespace cohort::nn {

struct ShardSpec {
  int64_t dim = 0;
  int64_t parts = 1;
  int64_t shards = 1;
  int64_t index = 0;
  bool sharded() const { return shards > 1; }
};

// The full tensor's shape, from a piece's.
Shape full_shape(const Shape& local, const ShardSpec& s);
// For each element of the local piece (row-major), its flat index in the full tensor.
std::vector<int64_t> full_indices(const Shape& local, const ShardSpec& s);
// The piece `s` describes, cut from the full tensor (a contiguous copy). InvalidArgument when
// the full tensor's dimension does not divide into parts * shards.
Tensor take_shard(const Tensor& full, const ShardSpec& s);
// The full tensor from every shard's piece, pieces[k] holding index k (all of one spec but the
// index).
Tensor join_shards(const std::vector<Tensor>& pieces, const ShardSpec& s);

}  // namespace cohort::nn
