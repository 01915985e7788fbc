#include "cohort/monitor/job_view.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cohort/core/error.h"

namespace cohort::monitor {
namespace {

void push_bounded(std::deque<Json>& q, Json value, size_t cap) {
  q.push_back(std::move(value));
  while (q.size() > cap) q.pop_front();
}

Json to_array(const std::deque<Json>& q) {
  return Json(std::vector<Json>(q.begin(), q.end()));
}

// The step-time breakdown a step record carries (milliseconds per step).
Json breakdown_of(const Json& step) {
  Json b = Json::object();
  for (const char* k :
       {"data_ms", "forward_ms", "backward_ms", "optimizer_ms", "exposed_comm_ms", "comm_ms"})
    b[k] = number_in(step, k);
  return b;
}

}  // namespace

double number_in(const Json& record, const char* key, double fallback) {
  auto it = record.find(key);
  if (it == record.end()) return fallback;
  return it->is_number() ? it->get<double>() : std::numeric_limits<double>::quiet_NaN();
}

JobView::JobView(JobViewOptions options) : options_(options) {
  for (int r = 0; r < options_.workers; ++r) ranks_[r];
}

void JobView::ingest(int rank, const Json& record) {
  std::lock_guard lock(mu_);
  ingest_locked(rank, record);
}

void JobView::ingest_at(int rank, const Json& record, double time_s) {
  std::lock_guard lock(mu_);
  replayed_ = true;
  replay_s_ = time_s;
  ingest_locked(rank, record);
}

void JobView::ingest_locked(int rank, const Json& record) {
  if (!record.is_object() || !record.contains("event") || !record["event"].is_string()) {
    ++malformed_;
    return;
  }
  try {
    dispatch(rank, record["event"].get<std::string>(), record);
  } catch (const Json::exception&) {  // a field of the wrong type: the record is skipped
    ++malformed_;
  }
}

void JobView::dispatch(int rank, const std::string& kind, const Json& record) {
  if (kind == "step") {
    on_step(rank, record);
  } else if (kind == "eval") {
    on_eval(record);
  } else if (kind == "start") {
    on_start(rank, record);
  } else if (kind == "checkpoint") {
    add_event("checkpoint", "checkpoint after step " + std::to_string(record.value("step", 0)));
  } else if (kind == "membership") {  // in-place recovery (docs/elastic.md)
    add_event("membership",
              detail::str("generation ", record.value("generation", 0), ": ",
                          record.value("workers", 0), " of ", record.value("previous_workers", 0),
                          " workers go on from step ", record.value("step", 0), " (recovered in ",
                          record.value("recover_s", 0.0), " s)"));
  } else if (kind == "summary") {
    ranks_[rank].finished = true;
    if (rank == 0) summary_ = record;
  }
}

void JobView::on_start(int rank, const Json& r) {
  state_ = "running";
  if (rank != 0) return;
  // The fields snapshot() reads, checked here: a wrong type skips the record (ingest).
  (void)r.value("total_steps", int64_t{0});
  (void)r.value("model", std::string());
  (void)r.value("energy_source", std::string());
  start_ = r;
  if (r.value("start_step", 0) > 0)
    add_event("resume", "resumed from step " + std::to_string(r.value("start_step", 0)));
}

void JobView::on_step(int rank, const Json& r) {
  state_ = "running";
  // Read every field first: a record with a field of the wrong type changes nothing.
  const int64_t step = r.value("step", int64_t{0});
  const int64_t samples = r.value("samples", int64_t{0});
  const uint64_t sent = r.value("bytes_sent", uint64_t{0});
  const uint64_t received = r.value("bytes_received", uint64_t{0});
  const uint64_t steps = r.value("steps", uint64_t{1});
  const double energy = number_in(r, "energy_j");
  const double mean_s = 1e-3 * (number_in(r, "data_ms") + number_in(r, "forward_ms") +
                                number_in(r, "backward_ms") + number_in(r, "optimizer_ms"));
  RankTotals& t = ranks_[rank];
  t.last_step = r;
  t.step = step;
  t.samples_counted += std::max<int64_t>(0, samples - t.samples);
  t.samples = samples;
  t.bytes_sent += sent;
  t.bytes_received += received;
  if (std::isfinite(energy)) t.energy_j += energy;
  if (std::isfinite(mean_s)) {
    for (size_t b = 0; b < kStepBuckets.size(); ++b)
      if (mean_s <= kStepBuckets[b]) t.bucket_counts[b] += steps;
    t.step_count += steps;
    t.step_seconds_sum += mean_s * double(steps);
  }
  if (r.contains("straggler") && r["straggler"].is_object()) {
    straggler_ = r["straggler"];
    straggler_["step"] = t.step;
    const int slow = straggler_.value("rank", -1);
    for (auto& [k, v] : ranks_) v.straggler = k == slow;
  }
  const double job_sps = job_samples_per_s();
  if (rank == 0) {
    push_bounded(loss_, Json::array({t.step, number_in(r, "loss")}), options_.history);
    push_bounded(step_tput_, Json::array({t.step, job_sps}), options_.history);
  }
  push_bounded(throughput_, Json::array({elapsed_s(), job_sps}), options_.history);
}

void JobView::on_eval(const Json& r) {
  push_bounded(evals_, r, options_.history);
}

void JobView::event(const std::string& kind, const std::string& text) {
  std::lock_guard lock(mu_);
  if (kind == "restart") ++restarts_;
  if (kind == "finished" || kind == "failed" || kind == "incomplete") state_ = kind;
  add_event(kind, text);
}

void JobView::add_event(const std::string& kind, const std::string& text) {
  push_bounded(events_, Json{{"time_s", elapsed_s()}, {"kind", kind}, {"text", text}},
               options_.history);
}

double JobView::elapsed_s() const {
  if (replayed_) return replay_s_;
  return std::chrono::duration<double>(Clock::now() - started_).count();
}

double JobView::job_samples_per_s() const {
  double sum = 0;
  for (const auto& [rank, t] : ranks_) {
    const double sps = number_in(t.last_step, "samples_per_s");
    if (std::isfinite(sps)) sum += sps;
  }
  return sum;
}

Json JobView::snapshot() const {
  std::lock_guard lock(mu_);
  Json ranks = Json::array();
  uint64_t bytes = 0;
  double energy = 0;
  for (const auto& [rank, t] : ranks_) {
    ranks.push_back(Json{{"rank", rank},
                         {"step", t.step},
                         {"samples", t.samples},
                         {"loss", number_in(t.last_step, "loss")},
                         {"samples_per_s", number_in(t.last_step, "samples_per_s")},
                         {"breakdown", breakdown_of(t.last_step)},
                         {"bytes_sent", t.bytes_sent},
                         {"bytes_received", t.bytes_received},
                         {"energy_j", t.energy_j},
                         {"straggler", t.straggler},
                         {"finished", t.finished}});
    bytes += t.bytes_sent;
    energy += t.energy_j;
  }
  const double sps = job_samples_per_s();
  const double baseline = number_in(start_, "baseline_samples_per_s");
  const int workers = std::max<int>(options_.workers, int(ranks_.size()));
  Json efficiency = baseline > 0 && workers > 0 ? Json(sps / (workers * baseline)) : Json();
  if (summary_.contains("scaling_efficiency")) efficiency = summary_["scaling_efficiency"];
  return Json{{"state", state_},
              {"elapsed_s", elapsed_s()},
              {"workers", workers},
              {"total_steps", start_.value("total_steps", 0)},
              {"model", start_.value("model", "")},
              {"samples_per_s", sps},
              {"bytes_sent", bytes},
              {"energy_j", energy},
              {"energy_source", start_.value("energy_source", "")},
              {"scaling_efficiency", efficiency},
              {"restarts", restarts_},
              {"straggler", straggler_},
              {"ranks", ranks},
              {"loss", to_array(loss_)},
              {"throughput", to_array(throughput_)},
              {"step_throughput", to_array(step_tput_)},
              {"evals", to_array(evals_)},
              {"events", to_array(events_)},
              {"summary", summary_}};
}

std::map<int, RankTotals> JobView::totals() const {
  std::lock_guard lock(mu_);
  return ranks_;
}

int JobView::workers() const {
  std::lock_guard lock(mu_);
  return std::max<int>(options_.workers, int(ranks_.size()));
}

int64_t JobView::restarts() const {
  std::lock_guard lock(mu_);
  return restarts_;
}

uint64_t JobView::malformed() const {
  std::lock_guard lock(mu_);
  return malformed_;
}

}  // namespace cohort::monitor
