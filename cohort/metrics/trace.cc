#include "cohort/metrics/trace.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cohort/core/error.h"

namespace cohort::metrics {

ClockOffset estimate_offset(const std::vector<ClockRound>& rounds) {
  COHORT_CHECK_ARG(!rounds.empty(), "clock offset: no round trips to estimate from");
  const ClockRound* best = nullptr;
  for (const ClockRound& r : rounds) {
    COHORT_CHECK_ARG(r.received_us >= r.sent_us, "clock offset: a round came back at ",
                     r.received_us, " us, before it was sent at ", r.sent_us, " us");
    if (!best || r.received_us - r.sent_us < best->received_us - best->sent_us) best = &r;
  }
  double rtt = best->received_us - best->sent_us;
  return {.offset_us = best->reference_us - (best->sent_us + rtt / 2),
          .uncertainty_us = rtt / 2,
          .rounds = int(rounds.size())};
}

Tracer::Tracer(TracerOptions options) : options_(options) {}

double Tracer::to_us(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
}

void Tracer::set_clock_offset(const ClockOffset& offset) {
  std::lock_guard<std::mutex> lock(mu_);
  offset_ = offset;
}

int Tracer::track_id(std::string_view track) {
  for (size_t i = 0; i < tracks_.size(); ++i) {
    if (tracks_[i] == track) return int(i) + 1;
  }
  tracks_.emplace_back(track);
  return int(tracks_.size());
}

void Tracer::complete(std::string name, std::string_view category, Clock::time_point start,
                      Clock::time_point end, std::string_view track, nlohmann::json args) {
  double start_us = to_us(start);
  double duration_us = std::max(0.0, to_us(end) - start_us);  // a span never runs backwards
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= options_.max_events) {
    ++dropped_;
    return;
  }
  events_.push_back({std::move(name), std::string(category), start_us, duration_us, track_id(track),
                     std::move(args)});
}

size_t Tracer::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

size_t Tracer::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

namespace {

nlohmann::json name_event(const char* what, int pid, int tid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

// Microseconds rounded to nanoseconds: shorter files, no precision a viewer could show.
double round_ns(double us) {
  return std::round(us * 1000.0) / 1000.0;
}

}  // namespace

nlohmann::json Tracer::to_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  const int pid = options_.rank;
  nlohmann::json events = nlohmann::json::array();
  events.push_back(name_event("process_name", pid, 0, "rank " + std::to_string(pid)));
  events.push_back({{"name", "process_sort_index"},
                    {"ph", "M"},
                    {"pid", pid},
                    {"tid", 0},
                    {"args", {{"sort_index", pid}}}});
  for (size_t i = 0; i < tracks_.size(); ++i) {
    events.push_back(name_event("thread_name", pid, int(i) + 1, tracks_[i]));
  }
  for (const Event& e : events_) {
    nlohmann::json j{{"name", e.name},
                     {"cat", e.category},
                     {"ph", "X"},
                     {"ts", round_ns(e.start_us + offset_.offset_us)},
                     {"dur", round_ns(e.duration_us)},
                     {"pid", pid},
                     {"tid", e.track}};
    if (!e.args.is_null()) j["args"] = e.args;
    events.push_back(std::move(j));
  }
  if (dropped_ > 0) {  // said where the viewer shows it, at the end of the kept events
    double at = events_.empty() ? 0 : events_.back().start_us + offset_.offset_us;
    events.push_back({{"name", "events dropped (run.trace_max_events)"},
                      {"ph", "i"},
                      {"s", "p"},
                      {"ts", round_ns(at)},
                      {"pid", pid},
                      {"tid", 1},
                      {"args", {{"dropped", dropped_}, {"kept", events_.size()}}}});
  }
  nlohmann::json meta{{"rank", pid},
                      {"clock_offset_us", offset_.offset_us},
                      {"clock_uncertainty_us", offset_.uncertainty_us},
                      {"clock_rounds", offset_.rounds},
                      {"events", events_.size()},
                      {"events_dropped", dropped_}};
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", meta}};
}

namespace {

void write_json(const nlohmann::json& j, const std::string& path) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    COHORT_CHECK_IO(f.good(), "trace: cannot open '", tmp, "': ", std::strerror(errno));
    f << j.dump();
    f.flush();
    COHORT_CHECK_IO(f.good(), "trace: cannot write '", tmp, "': ", std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  COHORT_CHECK_IO(!ec, "trace: cannot rename '", tmp, "' to '", path, "': ", ec.message());
}

}  // namespace

void Tracer::write(const std::string& path) const {
  write_json(to_json(), path);
}

int merge_traces(const std::vector<std::string>& rank_files, const std::string& out) {
  nlohmann::json events = nlohmann::json::array();
  nlohmann::json ranks = nlohmann::json::array();
  nlohmann::json missing = nlohmann::json::array();
  int merged = 0;
  for (const std::string& path : rank_files) {
    std::ifstream f(path);
    nlohmann::json one =
        f ? nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
    if (!one.is_object() || !one.contains("traceEvents")) {
      missing.push_back(path);  // not there (another node's run dir) or cut short
      continue;
    }
    for (auto& e : one["traceEvents"]) events.push_back(std::move(e));
    ranks.push_back(one.value("otherData", nlohmann::json::object()));
    ++merged;
  }
  nlohmann::json meta{{"ranks", std::move(ranks)}, {"missing_rank_files", std::move(missing)}};
  write_json({{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", meta}},
             out);
  return merged;
}

}  // namespace cohort::metrics
