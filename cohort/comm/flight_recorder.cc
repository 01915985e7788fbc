#include "cohort/comm/flight_recorder.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cohort/core/error.h"

namespace cohort::comm {

const char* flight_state_name(FlightState s) {
  switch (s) {
    case FlightState::kIssued:
      return "issued";
    case FlightState::kStarted:
      return "started";
    case FlightState::kCompleted:
      return "completed";
    case FlightState::kFailed:
      return "failed";
  }
  return "?";
}

int64_t flight_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t FlightRecorder::issue(FlightEntry e) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  if (!e.p2p) last_issued_seq_ = int64_t(e.seq);
  if (capacity_ == 0) return id;
  e.state = FlightState::kIssued;
  e.issued_us = flight_now_us();
  if (ring_.size() < capacity_) {
    ring_.push_back(std::move(e));
  } else {
    ring_[id % capacity_] = std::move(e);
  }
  return id;
}

FlightEntry* FlightRecorder::find(uint64_t id) {
  // Live ids are the last `capacity_` issued; older slots were reused.
  if (capacity_ == 0 || id >= next_id_ || next_id_ - id > capacity_) return nullptr;
  return &ring_[id % capacity_];
}

void FlightRecorder::start(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (FlightEntry* e = find(id)) {
    e->state = FlightState::kStarted;
    e->started_us = flight_now_us();
  }
}

void FlightRecorder::complete(uint64_t id, int64_t collective_seq) {
  std::lock_guard<std::mutex> lock(mu_);
  last_completed_seq_ = std::max(last_completed_seq_, collective_seq);
  FlightEntry* e = find(id);
  if (!e) return;
  e->state = FlightState::kCompleted;
  e->finished_us = flight_now_us();
}

void FlightRecorder::fail(uint64_t id, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (FlightEntry* e = find(id)) {
    e->state = FlightState::kFailed;
    e->finished_us = flight_now_us();
    e->error = error;
  }
}

std::vector<FlightEntry> FlightRecorder::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (ring_.size() < capacity_) return ring_;
  std::vector<FlightEntry> out;  // full ring: the oldest sits where the next one goes
  out.reserve(capacity_);
  for (uint64_t i = 0; i < capacity_; ++i) out.push_back(ring_[(next_id_ + i) % capacity_]);
  return out;
}

nlohmann::json FlightRecorder::dump_json(int rank, int world_size,
                                         const std::string& reason) const {
  nlohmann::json entries = nlohmann::json::array();
  for (const FlightEntry& e : this->entries()) {
    nlohmann::json j{{"seq", e.seq},
                     {"p2p", e.p2p},
                     {"op", e.op},
                     {"dtype", e.dtype},
                     {"count", e.count},
                     {"bytes", e.bytes},
                     {"peer", e.peer},
                     {"root", e.root},
                     {"algorithm", e.algorithm},
                     {"state", flight_state_name(e.state)},
                     {"issued_us", e.issued_us},
                     {"started_us", e.started_us},
                     {"finished_us", e.finished_us}};
    if (e.state == FlightState::kFailed) j["error"] = e.error;
    entries.push_back(std::move(j));
  }
  std::lock_guard<std::mutex> lock(mu_);
  return {{"version", 1},
          {"rank", rank},
          {"world_size", world_size},
          {"reason", reason},
          {"time_us", flight_now_us()},
          {"last_issued_seq", last_issued_seq_},
          {"last_completed_seq", last_completed_seq_},
          {"entries", std::move(entries)}};
}

void write_flight_dump(const std::string& path, const nlohmann::json& dump) {
  namespace fs = std::filesystem;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << dump.dump(1) << "\n";
    out.flush();
    COHORT_CHECK_IO(out.good(), "flight recorder: cannot write ", tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);  // readers see the whole file or none
  COHORT_CHECK_IO(!ec, "flight recorder: cannot rename ", tmp, " to ", path, ": ", ec.message());
}

}  // namespace cohort::comm
