#pragma once
// Averaging a list of float32 tensors across a group with one allreduce (ReduceOp::avg): the
// tensors are packed, in list order, into one contiguous buffer, reduced in place and unpacked.
// One collective per call instead of one per tensor: local SGD averages every parameter this
// way, and its warm-up averages every gradient (parallel/decentralized/local_sgd_strategy.h).
//
// Every rank calls with a list of the same total length; a rank whose total differs is an
// InvalidArgument on every rank alike (decided from one small allreduce), naming `what` and the
// two lengths, instead of a collective that mismatches. Results are bit-identical on every
// rank (the allreduce's reduction order is fixed). The buffer is kept between calls and taken
// from the group's shared arena where every rank has one (comm/shared_buffer.h): the allreduce
// then reads peers' buffers in place.
#include <chrono>
#include <string>
#include <vector>

#include "cohort/comm/process_group.h"
#include "cohort/tensor/tensor.h"

namespace cohort::parallel {

// What one call moved, for the step metrics.
struct FlatAverageStats {
  double seconds = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;

  FlatAverageStats& operator+=(const FlatAverageStats& o);
};

class FlatAverager {
 public:
  // `what` names the list in errors ("parameters", "gradients", ...).
  FlatAverager(comm::ProcessGroup& group, std::string what, std::chrono::milliseconds timeout);

  // Replaces each tensor's values by their average over the ranks. Tensors must be float32 (any
  // strides); InvalidArgument naming the first that is not.
  FlatAverageStats average(const std::vector<Tensor>& tensors);

  // Whether the buffer lies in the group's shared arena (as DDP's buckets do, where it has one).
  bool in_arena() const { return bool(arena_); }

 private:
  void pack(const std::vector<Tensor>& tensors);
  void unpack(const std::vector<Tensor>& tensors);
  void set_length(size_t n);

  comm::ProcessGroup& group_;
  std::string what_;
  std::chrono::milliseconds timeout_;
  // The flat buffer, `length_` floats: arena memory when every rank got some, else ordinary.
  comm::SharedBuffer arena_;
  std::vector<float> ordinary_;
  float* data_ = nullptr;
  size_t length_ = 0;
  bool agreed_ = false;  // the ranks agreed on length_ and on where the buffer lies
};

// The packed values of `tensors` (float32), in list order.
std::vector<float> pack_values(const std::vector<Tensor>& tensors);

}  // namespace cohort::parallel
