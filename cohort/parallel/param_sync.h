#pragma once
// Collective checks and copies over (name, tensor) lists that DDP runs at construction and
// when asked to verify replicas. Every rank of the group calls each function with its own
// list; errors are raised on every rank alike (decided from gathered data), so no rank is left
// waiting in a collective the others skipped.
#include <chrono>

#include "cohort/comm/process_group.h"
#include "cohort/nn/module.h"

namespace cohort::parallel {

// InvalidArgument (on every rank) when any rank's list differs from rank 0's in length, a
// name, a shape or a dtype. The message names the first differing entry as rank 0 has it, the
// ranks that differ and, on a differing rank, its own entry:
//   "DDP: parameters differ across ranks at #2: rank 0 has 'layers.1.weight' [4, 8] float32;
//    rank(s) 1 differ (this rank, 1, has 'layers.1.weight' [5, 8] float32)"
void verify_same_structure(comm::ProcessGroup& group, const nn::NamedTensors& entries,
                           std::chrono::milliseconds timeout);

// Overwrites every tensor with rank 0's values (one broadcast per tensor; any dtype).
// Tensors must be contiguous. Lists must have the same structure (verify it first).
void broadcast_from_rank0(comm::ProcessGroup& group, const nn::NamedTensors& entries,
                          std::chrono::milliseconds timeout);

// Hashes every tensor's bytes and compares across ranks (one allgather of 8 bytes per tensor).
// InvalidArgument naming the ranks whose values differ from rank 0's and the first differing
// tensor name; returns normally when all agree.
void check_in_sync(comm::ProcessGroup& group, const nn::NamedTensors& entries,
                   std::chrono::milliseconds timeout);

// 64-bit FNV-1a style hash of a byte range (deterministic across runs and machines).
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed = 1469598103934665603ull);

}  // namespace cohort::parallel
