#include "cohort/launch/flight_verdict.h"

#include <algorithm>
#include <fstream>

#include "cohort/core/error.h"

namespace cohort::launch {
namespace {

using cohort::detail::str;

FlightCall call_of(const nlohmann::json& e) {
  FlightCall c;
  c.seq = e.value("seq", uint64_t{0});
  c.p2p = e.value("p2p", false);
  c.op = e.value("op", "?");
  c.dtype = e.value("dtype", "");
  c.algorithm = e.value("algorithm", "");
  c.state = e.value("state", "");
  c.count = e.value("count", uint64_t{0});
  c.peer = e.value("peer", -1);
  return c;
}

RankFlight parse(int rank, const nlohmann::json& j) {
  RankFlight r;
  r.rank = rank;
  if (!j.is_object()) return r;
  r.wrote = true;
  r.last_completed_seq = j.value("last_completed_seq", int64_t{-1});
  r.reason = j.value("reason", "");
  if (!j.contains("entries") || !j["entries"].is_array()) return r;
  for (const nlohmann::json& e : j["entries"]) {
    if (e.value("state", "") == "completed") continue;
    r.stuck = call_of(e);
    break;
  }
  return r;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += str(i ? ", " : "", ranks[i]);
  return s;
}

std::string where(const RankFlight& r) {
  return r.stuck ? r.stuck->describe()
                 : str("the call after #", r.last_completed_seq, " (not in its ring)");
}

// Rule 2 and 3 of the header, over the ranks that wrote a record.
void judge_writers(const std::vector<const RankFlight*>& writers, FlightVerdict& v) {
  int64_t lo = writers[0]->last_completed_seq, hi = lo;
  for (const RankFlight* r : writers) {
    lo = std::min(lo, r->last_completed_seq);
    hi = std::max(hi, r->last_completed_seq);
  }
  if (lo == hi) {
    v.summary = str("no rank is behind: every rank stopped at ", where(*writers[0]),
                    " (a mismatch or a broken link: see each rank's reason)");
    return;
  }
  const RankFlight* first = nullptr;
  for (const RankFlight* r : writers) {
    if (r->last_completed_seq != lo) continue;
    v.behind.push_back(r->rank);
    if (!first) first = r;
  }
  v.summary = str(rank_list(v.behind), v.behind.size() == 1 ? " is" : " are",
                  " behind: last completed collective #", lo, " while others reached #", hi,
                  "; stuck in ", where(*first));
}

}  // namespace

std::string FlightCall::describe() const {
  std::string what = str(op, " #", seq, " (", dtype, " x ", count);
  if (p2p && peer >= 0) what += str(", peer ", peer);
  if (!p2p && !algorithm.empty()) what += ", " + algorithm;
  return what + ", " + state + ")";
}

bool FlightVerdict::any_record() const {
  return std::any_of(ranks.begin(), ranks.end(), [](const RankFlight& r) { return r.wrote; });
}

FlightVerdict analyse_flight_records(const std::vector<int>& ranks,
                                     const std::vector<nlohmann::json>& records) {
  FlightVerdict v;
  std::vector<const RankFlight*> writers;
  std::vector<int> silent;
  for (size_t i = 0; i < ranks.size(); ++i)
    v.ranks.push_back(parse(ranks[i], i < records.size() ? records[i] : nlohmann::json()));
  for (const RankFlight& r : v.ranks) {
    if (r.wrote) {
      writers.push_back(&r);
    } else {
      silent.push_back(r.rank);
    }
  }
  if (writers.empty()) {
    v.summary = "no rank wrote a record (no communication failed, or every rank was killed)";
  } else if (!silent.empty()) {  // rule 1
    v.behind = silent;
    std::vector<int> waiting;
    for (const RankFlight* r : writers) waiting.push_back(r->rank);
    v.summary = str(rank_list(silent), silent.size() == 1 ? " is" : " are",
                    " behind: wrote no record (stopped, hung or killed) while ", rank_list(waiting),
                    " failed waiting in ", where(*writers[0]));
  } else {
    judge_writers(writers, v);
  }
  return v;
}

FlightVerdict read_flight_records(const std::string& dir, const std::vector<int>& ranks) {
  std::vector<nlohmann::json> records;
  for (int r : ranks) {
    std::ifstream in(str(dir, "/rank", r, ".json"));
    // A missing or torn file reads as null: the rank is treated as having written nothing.
    records.push_back(in ? nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false)
                         : nlohmann::json());
    if (records.back().is_discarded()) records.back() = nullptr;
  }
  return analyse_flight_records(ranks, records);
}

std::string FlightVerdict::format(const std::string& dir) const {
  int wrote = 0;
  for (const RankFlight& r : ranks) wrote += r.wrote;
  std::string out = str("flight recorder: ", wrote, " of ", ranks.size(), " rank",
                        ranks.size() == 1 ? "" : "s", " wrote a record (", dir, ")\n");
  for (const RankFlight& r : ranks) {
    if (!r.wrote) {
      out += str("  rank ", r.rank, " wrote no record: stopped, hung or killed\n");
      continue;
    }
    std::string reason = r.reason.size() > 300 ? r.reason.substr(0, 300) + "..." : r.reason;
    out += str("  rank ", r.rank, ": last completed collective #", r.last_completed_seq, "; in ",
               where(r), ": ", reason, "\n");
  }
  return out + "verdict: " + summary + "\n";
}

}  // namespace cohort::launch
