#pragma once
// The device mesh: the world's ranks laid out as a 3-D grid dp x pp x tp (Megatron-LM's layout),
// and the three sub-groups each rank trains in: its tensor-parallel group (ranks that hold
// shards of the same layers), its data-parallel group (replicas of the same shard) and its
// pipeline group (the stages of one model replica).
//
// Rank order, Megatron's: tp fastest, then dp, then pp slowest,
//
//   global rank = pp * (dp_size * tp_size) + dp * tp_size + tp
//
// so a tp group is tp_size neighbouring ranks. Launchers number ranks host by host, and tensor
// parallelism talks most (two collectives per layer, forward and backward), so its groups land
// on one host's fast links; pipeline stages exchange only activations, so pp spans hosts.
//
//   MeshShape shape = resolve_mesh({.dp = 0, .pp = 2, .tp = 2}, world->size());  // dp = rest
//   DeviceMesh mesh = make_device_mesh(world, shape);
//   mesh.tp->allreduce(...);   // partial sums of a row-parallel matmul
//   mesh.dp->allreduce(...);   // gradients of this rank's shard
#include <cstdint>
#include <memory>
#include <vector>

#include "cohort/comm/process_group.h"

namespace cohort::parallel {

struct MeshShape {
  int dp = 1, pp = 1, tp = 1;
};
struct MeshCoord {
  int dp = 0, pp = 0, tp = 0;
};

// InvalidArgument naming the keys and values when a size is < 1 or dp * pp * tp != world.
void check_mesh(const MeshShape& shape, int world);
// `requested` with dp = 0 replaced by world / (pp * tp) (an InvalidArgument when that does not
// divide), then checked by check_mesh.
MeshShape resolve_mesh(MeshShape requested, int world);

// Coordinates of a global rank and back; both check their argument against the shape.
MeshCoord mesh_coord(const MeshShape& shape, int rank);
int mesh_rank(const MeshShape& shape, MeshCoord coord);

// The global ranks of `rank`'s groups, in group-rank order (group rank i is element i).
std::vector<int> tp_group_ranks(const MeshShape& shape, int rank);
std::vector<int> dp_group_ranks(const MeshShape& shape, int rank);
std::vector<int> pp_group_ranks(const MeshShape& shape, int rank);

// InvalidArgument naming the keys and values when the GPT cannot be cut this way: more
// pipeline stages than layers, or tp not dividing n_head, n_embd or the vocabulary.
void check_mesh_fits_gpt(const MeshShape& shape, int64_t n_layer, int64_t n_head, int64_t n_embd,
                         int64_t vocab);

// This rank's place in the mesh and its groups. Every group is a real ProcessGroup, also one of
// a single rank (a dimension of size 1): callers never test for null, and a collective over one
// rank returns its input at no network cost.
struct DeviceMesh {
  MeshShape shape;
  MeshCoord coord;
  std::shared_ptr<comm::ProcessGroup> world, dp, pp, tp;
};

// Collective over `world` (every rank calls it, in the same order as its other group
// operations): resolves `requested` against world->size() and splits off the three groups.
DeviceMesh make_device_mesh(std::shared_ptr<comm::ProcessGroup> world, MeshShape requested);

}  // namespace cohort::parallel
