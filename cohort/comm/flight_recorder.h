#pragma once
// FlightRecorder: a ring of a communicator's last N operations (PyTorch's Flight Recorder, for
// cohort). Every collective and point-to-point batch a Communicator runs is recorded when it is
// issued, when it starts running and when it completes or fails. When an operation times out
// or fails, the Communicator writes the ring as JSON (dump_json below) so that the launcher can
// tell which rank is behind and at which call (launch/flight_verdict.h).
//
// Dump format (one file per rank, written atomically: temporary file, then rename):
//   {"version": 1, "rank": R, "world_size": N, "reason": "<the error>", "time_us": T,
//    "last_issued_seq": S, "last_completed_seq": C,      // collectives only; -1: none
//    "entries": [                                         // oldest first, at most N of them
//      {"seq": 57, "p2p": false, "op": "allreduce", "dtype": "f32", "count": 1009,
//       "bytes": 4036, "peer": -1, "root": -1, "algorithm": "ring",
//       "state": "issued" | "started" | "completed" | "failed",
//       "issued_us": ..., "started_us": ..., "finished_us": ...,  // 0: not yet
//       "error": "..."}                                   // failed entries only
//    ]}
// Collectives are numbered by the communicator's sequence number (the same on every rank);
// point-to-point entries carry their pair's message counter, `peer` the other rank. Times are
// microseconds of the system clock (comparable across the ranks of one host).
//
// Thread-safe: operations are issued on the user's thread and run on the worker thread. Its
// mutex is a leaf (taken under Communicator::mu_, never the other way round).
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cohort::comm {

enum class FlightState : uint8_t { kIssued, kStarted, kCompleted, kFailed };
const char* flight_state_name(FlightState s);

struct FlightEntry {
  uint64_t seq = 0;
  bool p2p = false;
  std::string op;  // "allreduce", "send", "recv", "send_recv" (a batch), ...
  std::string dtype;
  uint64_t count = 0;
  uint64_t bytes = 0;
  int peer = -1;  // point-to-point only
  int root = -1;  // rooted collectives only
  std::string algorithm;
  FlightState state = FlightState::kIssued;
  int64_t issued_us = 0, started_us = 0, finished_us = 0;
  std::string error;
};

class FlightRecorder {
 public:
  // capacity 0: keeps no entries (dumps an empty ring), only the sequence numbers.
  explicit FlightRecorder(size_t capacity) : capacity_(capacity) {}

  // Records a new operation; returns its id for the calls below.
  uint64_t issue(FlightEntry e);
  void start(uint64_t id);
  // `collective_seq`: the op's sequence number if it is a collective, -1 for point-to-point;
  // counted even when the op's slot was already reused (more than `capacity` ops issued after
  // it, e.g. many DDP buckets in flight), so that last_completed_seq stays right.
  void complete(uint64_t id, int64_t collective_seq);
  void fail(uint64_t id, const std::string& error);

  // The ring, oldest first.
  std::vector<FlightEntry> entries() const;
  nlohmann::json dump_json(int rank, int world_size, const std::string& reason) const;

 private:
  FlightEntry* find(uint64_t id);  // null once the ring has overwritten it

  size_t capacity_;
  mutable std::mutex mu_;          // leaf lock
  std::vector<FlightEntry> ring_;  // slot id % capacity_
  uint64_t next_id_ = 0;
  // Collectives only, over the communicator's life (the ring may have dropped them); -1: none.
  int64_t last_issued_seq_ = -1, last_completed_seq_ = -1;
};

// Microseconds of the system clock, the recorder's time base.
int64_t flight_now_us();

// Writes `dump` to `path` atomically (path + ".tmp", then rename). IoError naming the path.
void write_flight_dump(const std::string& path, const nlohmann::json& dump);

}  // namespace cohort::comm
