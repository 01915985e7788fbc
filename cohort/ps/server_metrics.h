#pragma once
// ServerMetrics: a parameter server's traffic and queue, for its metrics records
// (metrics.server<i>.jsonl): bytes in and out, and the queue depth (requests waiting for an
// answer: BSP pushes gathered but not yet answered, plus SSP answers held back) sampled after
// each push. Every `every_updates` optimizer updates it hands out a ServerInterval (the
// "server_interval" record); the totals go into the "server_summary" record.
//
// Bytes are payload bytes of the requests received and of the answers sent (the service
// channel's frame headers are not counted): a push is its header + the range's gradient, its
// answer a header + the range's values.
//
// Not thread-safe: ParamServer calls it under its mutex.
#include <chrono>
#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "cohort/core/byte_meter.h"

namespace cohort::ps {

struct ServerTraffic {
  uint64_t bytes_in = 0, bytes_out = 0;
  int64_t queue_depth_max = 0;
  double queue_depth_sum = 0;  // over the samples (one per push)
  int64_t samples = 0;
  double queue_depth_mean() const { return samples > 0 ? queue_depth_sum / double(samples) : 0; }
};

// What a server did since its previous interval (or its first push).
struct ServerInterval {
  int64_t updates = 0;           // total so far
  int64_t interval_updates = 0;  // in this interval
  double seconds = 0;            // the interval's length
  ServerTraffic traffic;         // in this interval
  double updates_per_s() const { return seconds > 0 ? double(interval_updates) / seconds : 0; }
};

class ServerMetrics {
 public:
  using Clock = std::chrono::steady_clock;
  // every_updates <= 0: no intervals.
  explicit ServerMetrics(int64_t every_updates = 0) : every_(every_updates) {}

  void received(size_t bytes);
  void sent(size_t bytes);
  // After a push was handled: `queue_depth` requests wait for an answer, `updates` optimizer
  // updates were applied in all. An interval when `every_updates` passed since the last one.
  std::optional<ServerInterval> pushed(int64_t queue_depth, int64_t updates, Clock::time_point now);
  ServerTraffic total() const;

 private:
  int64_t every_;
  ByteMeter bytes_;                 // in: requests received; out: answers sent
  ServerTraffic total_, interval_;  // the queue depth samples (their bytes stay 0)
  int64_t interval_start_updates_ = 0;
  std::optional<Clock::time_point> interval_start_;
};

// The "server_interval" record of server `index`.
nlohmann::json interval_record(int index, const ServerInterval& i);
// The traffic fields of a record: bytes_in, bytes_out, queue_depth_max, queue_depth_mean.
nlohmann::json traffic_json(const ServerTraffic& t);

}  // namespace cohort::ps
