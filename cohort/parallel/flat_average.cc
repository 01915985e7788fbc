#include "cohort/parallel/flat_average.h"

#include <cstring>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"

namespace cohort::parallel {
namespace {

using Clock = std::chrono::steady_clock;

// A tensor over `data` (no copy), shaped like `t`.
Tensor view_of(float* data, const Tensor& t) {
  return from_external(data, t.shape(), DType::f32, nullptr);
}

size_t total_numel(const std::vector<Tensor>& tensors) {
  size_t n = 0;
  for (const Tensor& t : tensors) n += size_t(t.numel());
  return n;
}

}  // namespace

FlatAverageStats& FlatAverageStats::operator+=(const FlatAverageStats& o) {
  seconds += o.seconds;
  bytes_sent += o.bytes_sent;
  bytes_received += o.bytes_received;
  return *this;
}

FlatAverager::FlatAverager(comm::ProcessGroup& group, std::string what,
                           std::chrono::milliseconds timeout)
    : group_(group), what_(std::move(what)), timeout_(timeout) {}

// One allreduce(max) of (n, -n, no arena): every rank learns the largest and the smallest
// length, so all fail together when they differ, and whether any rank lacks arena memory, so
// that all pass arena buffers or none (the algorithm is chosen from them). Runs when the
// length changes: once for a fixed list.
void FlatAverager::set_length(size_t n) {
  if (agreed_ && n == length_) return;
  arena_ = {};
  try {
    if (n > 0) arena_ = group_.alloc_shared(n * sizeof(float));
  } catch (const IoError& e) {  // a full /dev/shm: ordinary memory
    log::warn("parallel", "averaging ", what_, " in ordinary memory: ", e.what());
  }
  int64_t v[3] = {int64_t(n), -int64_t(n), arena_ ? 0 : 1};
  group_.allreduce({.output = v,
                    .count = 3,
                    .dtype = comm::DType::i64,
                    .op = comm::ReduceOp::max,
                    .timeout = timeout_});
  COHORT_CHECK_ARG(v[0] == -v[1], "averaging ", what_, " across ranks: the ranks hold ", -v[1],
                   " to ", v[0], " values (this rank, ", group_.rank(), ", holds ", n,
                   "); every rank must average the same ", what_);
  if (v[2] != 0) arena_ = {};
  ordinary_.assign(arena_ ? 0 : n, 0.0f);
  data_ = arena_ ? arena_.as<float>() : ordinary_.data();
  length_ = n;
  agreed_ = true;
}

void FlatAverager::pack(const std::vector<Tensor>& tensors) {
  size_t off = 0;
  for (const Tensor& t : tensors) {
    view_of(data_ + off, t).copy_(t);
    off += size_t(t.numel());
  }
}

void FlatAverager::unpack(const std::vector<Tensor>& tensors) {
  size_t off = 0;
  for (const Tensor& t : tensors) {
    Tensor(t).copy_(view_of(data_ + off, t));
    off += size_t(t.numel());
  }
}

FlatAverageStats FlatAverager::average(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    COHORT_CHECK_ARG(t.dtype() == DType::f32, "averaging ", what_,
                     ": only float32 tensors are averaged, got ", t.str());
  }
  auto start = Clock::now();
  uint64_t sent = group_.bytes_sent(), received = group_.bytes_received();
  set_length(total_numel(tensors));
  if (length_ > 0) {
    pack(tensors);
    group_.allreduce(
        {.output = data_, .count = length_, .op = comm::ReduceOp::avg, .timeout = timeout_});
    unpack(tensors);
  }
  return {.seconds = std::chrono::duration<double>(Clock::now() - start).count(),
          .bytes_sent = group_.bytes_sent() - sent,
          .bytes_received = group_.bytes_received() - received};
}

std::vector<float> pack_values(const std::vector<Tensor>& tensors) {
  std::vector<float> out(total_numel(tensors));
  size_t off = 0;
  for (const Tensor& t : tensors) {
    view_of(out.data() + off, t).copy_(t);
    off += size_t(t.numel());
  }
  return out;
}

}  // namespace cohort::parallel
