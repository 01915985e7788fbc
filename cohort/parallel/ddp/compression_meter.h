#pragma once
// What a compressing DDP comm hook reports (docs/compression.md, "Metrics"): float32 bytes in,
// message bytes out, encode and decode time, per step over the interval since the last
// take_interval() and over the run. Shared by CompressionHook and PowerSgdHook.
#include <atomic>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cohort/core/byte_meter.h"

namespace cohort::parallel {

class CompressionMeter {
 public:
  void count_step() { ++interval_.steps; }
  void add_raw_bytes(uint64_t n) { bytes_.add_in(n); }
  void add_message_bytes(uint64_t n) { bytes_.add_out(n); }
  // Encoding and decoding may run in continuations on another thread.
  void add_encode_seconds(double s) {
    encode_ns_.fetch_add(int64_t(s * 1e9), std::memory_order_relaxed);
  }
  void add_decode_seconds(double s) {
    decode_ns_.fetch_add(int64_t(s * 1e9), std::memory_order_relaxed);
  }
  // compress_raw_bytes, compress_message_bytes, compress_ratio, compress_encode_ms,
  // compress_decode_ms per step since the last call; starts a new interval.
  nlohmann::json take_interval();
  // The same over the run, plus "compression": method.
  nlohmann::json summary(const std::string& method) const;

 private:
  struct Totals {
    uint64_t steps = 0;
    double encode_s = 0, decode_s = 0;
    void add(const Totals& o);
    nlohmann::json json(const ByteCounts& bytes) const;
  };
  Totals interval_, run_;
  ByteMeter bytes_;  // in: the float32 bytes given to the codec; out: its messages' bytes
  std::atomic<int64_t> encode_ns_{0}, decode_ns_{0};
};

}  // namespace cohort::parallel
