#pragma once
// The flight recorder's verdict (PyTorch's Flight Recorder analyser, for cohort): after a
// failed attempt, the launcher reads the rings the ranks wrote (comm/flight_recorder.h, one
// rank<R>.json per rank in COHORT_FLIGHT_DIR) and says which rank is behind and at which call.
//
// Reasoning, in order:
//   1. A rank that wrote no record never saw its operation fail: it was stopped, hung outside
//      the communicator, or killed before it could write. When its peers all failed waiting, it
//      is the one behind.
//   2. Otherwise the ranks whose last completed collective is the lowest are behind; the call
//      they were in is the first entry of their ring not completed.
//   3. Every rank at the same call: nobody is behind (a mismatch, a broken link; the reasons
//      say which).
// Pure functions over JSON, so the analysis is tested without processes and can be reused
// (a future `cohort flight DIR` command).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cohort::launch {

// A call as the verdict names it.
struct FlightCall {
  uint64_t seq = 0;
  bool p2p = false;
  std::string op, dtype, algorithm, state;
  uint64_t count = 0;
  int peer = -1;
  std::string describe() const;  // "allreduce #57 (f32 x 1009, ring, started)"
};

struct RankFlight {
  int rank = -1;
  bool wrote = false;               // a record was found
  int64_t last_completed_seq = -1;  // collectives; -1: none
  std::optional<FlightCall> stuck;  // the first call of its ring not completed
  std::string reason;               // the error it failed with
};

struct FlightVerdict {
  std::vector<RankFlight> ranks;  // in the order asked for
  std::vector<int> behind;        // ranks named as behind (empty: nobody)
  std::string summary;            // the one-line verdict
  bool any_record() const;
  // The report the launcher prints: a header, one line per rank, the verdict.
  std::string format(const std::string& dir) const;
};

// `records[i]` is rank `ranks[i]`'s dump, or null when it wrote none.
FlightVerdict analyse_flight_records(const std::vector<int>& ranks,
                                     const std::vector<nlohmann::json>& records);

// Reads <dir>/rank<R>.json for each rank (a missing or unreadable file counts as none) and
// analyses them.
FlightVerdict read_flight_records(const std::string& dir, const std::vector<int>& ranks);

}  // namespace cohort::launch
