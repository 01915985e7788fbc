#pragma once
// Differentiable collectives for tensor parallelism (Megatron-LM's mappings, mpu/mappings.py).
// Each is one autograd node over a ProcessGroup (the tensor-parallel group), so a sharded layer
// is written as ordinary ops with these at its boundaries:
//
//   copy_to_group      forward identity          backward allreduce-sum   (Megatron's f)
//   reduce_from_group  forward allreduce-sum     backward identity        (Megatron's g)
//   gather_from_group  forward allgather (last)  backward own slice
//
// Every rank of the group calls them in the same order, forward and backward (backward runs
// nodes in reverse creation order, the same on every rank for the same graph). Results are
// bit-identical on every rank: the collectives are (comm/collectives.h). float32 only. On a
// group of one they are identities and send nothing.
#include <memory>

#include "cohort/comm/process_group.h"
#include "cohort/tensor/tensor.h"

namespace cohort::parallel {

using GroupPtr = std::shared_ptr<comm::ProcessGroup>;

// x -> x; the gradient is summed over the group (the input feeds every rank's shard).
Tensor copy_to_group(const Tensor& x, const GroupPtr& group);
// x -> sum of x over the group; the gradient passes through (every rank's partial sum gets it).
Tensor reduce_from_group(const Tensor& x, const GroupPtr& group);
// x [..., n] -> [..., n * size]: rank k's x at columns [k n, (k + 1) n); the gradient is this
// rank's columns of the output's gradient.
Tensor gather_from_group(const Tensor& x, const GroupPtr& group);

// Raw helpers (no autograd) the ops and the vocab-parallel loss share.
// In place: t (contiguous float32) summed (or max-ed) over the group.
void allreduce_(Tensor& t, comm::ProcessGroup& group, comm::ReduceOp op);
// x [..., n] (any layout) -> [..., n * size], rank order along the last dim.
Tensor allgather_last_dim(const Tensor& x, comm::ProcessGroup& group);

}  // namespace cohort::parallel
