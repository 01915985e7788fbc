#pragma once
// ByteMeter: the bytes that went into and out of one stream, over the run and over the interval
// since the last take_interval(). The one byte counter behind the meters that report traffic
// per interval and per run: a parameter server's request and answer bytes
// (ps/server_metrics.h), a compressing DDP hook's float32 bytes in and message bytes out
// (parallel/ddp/compression_meter.h); ByteCounts alone is a federated client's bytes in one round
// (federated/server.h). What "in" and "out" mean is the owner's to say.
//
// Not thread-safe: each owner counts on one thread or under its own lock (an atomic per add
// would tax the hot paths that already hold one).
#include <cstdint>

namespace cohort {

struct ByteCounts {
  uint64_t bytes_in = 0, bytes_out = 0;

  ByteCounts& operator+=(const ByteCounts& o) {
    bytes_in += o.bytes_in;
    bytes_out += o.bytes_out;
    return *this;
  }
};

class ByteMeter {
 public:
  void add_in(uint64_t n) { interval_.bytes_in += n; }
  void add_out(uint64_t n) { interval_.bytes_out += n; }

  // Since the last take_interval().
  const ByteCounts& interval() const { return interval_; }
  // Over the run, the current interval included.
  ByteCounts total() const {
    ByteCounts t = run_;
    t += interval_;
    return t;
  }
  // The current interval's counts; a new interval starts.
  ByteCounts take_interval() {
    const ByteCounts i = interval_;
    run_ += i;
    interval_ = {};
    return i;
  }

 private:
  ByteCounts interval_, run_;
};

}  // namespace cohort
