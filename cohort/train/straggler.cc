#include "cohort/train/straggler.h"

#include <algorithm>
#include <cstdio>

namespace cohort::train {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

StragglerOptions straggler_options(const Config& cfg) {
  return {.every = cfg.get_int("metrics.straggler_every"),
          .factor = cfg.get_float("metrics.straggler_factor"),
          .patience = cfg.get_int("metrics.straggler_patience")};
}

std::optional<StragglerFinding> StragglerDetector::judge(const std::vector<double>& step_s) {
  const size_t n = step_s.size();
  streak_.resize(n, 0);
  std::optional<StragglerFinding> worst;
  for (size_t r = 0; r < n && n > 1; ++r) {
    std::vector<double> others;
    for (size_t k = 0; k < n; ++k)
      if (k != r) others.push_back(step_s[k]);
    const double m = median(std::move(others));
    const double factor = m > 0 ? step_s[r] / m : 0;
    streak_[r] = factor >= options_.factor ? streak_[r] + 1 : 0;
    if (streak_[r] < options_.patience || (worst && worst->factor >= factor)) continue;
    worst = StragglerFinding{int(r), factor, step_s[r], m, streak_[r]};
  }
  return worst;
}

std::string describe(const StragglerFinding& f, int64_t every) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "straggler: rank %d median step %.1f ms, %.1fx the median of the others (%.1f ms), "
                "slow for %ld intervals of %ld steps",
                f.rank, 1e3 * f.step_s, f.factor, 1e3 * f.others_median_s, long(f.intervals),
                long(every));
  return buf;
}

StragglerWatch::StragglerWatch(StragglerOptions options, std::shared_ptr<comm::ProcessGroup> group)
    : detector_(options) {
  if (options.every > 0 && group && group->size() > 1) {
    group_ = std::move(group);
    named_.resize(size_t(group_->size()));
  }
}

std::optional<std::string> StragglerWatch::after_step(int64_t step, double compute_s) {
  if (!group_) return std::nullopt;
  interval_s_.push_back(compute_s);
  const int64_t every = detector_.options().every;
  if (step % every != 0) return std::nullopt;
  // Every rank reaches this step together (lockstep strategies), so the allgather matches.
  double mine = median(std::move(interval_s_));
  interval_s_.clear();
  std::vector<double> all(size_t(group_->size()));
  group_->allgather({.input = &mine, .output = all.data(), .count = 1, .dtype = comm::DType::f64});
  std::optional<StragglerFinding> f = detector_.judge(all);
  quiet_intervals_ = detector_.slow_now(last_named_) ? 0 : quiet_intervals_ + 1;
  if (quiet_intervals_ >= detector_.options().patience) last_named_ = -1;
  if (!f) return std::nullopt;
  quiet_intervals_ = 0;
  Named& n = named_[size_t(f->rank)];
  if (n.intervals++ == 0) n.first_step = step;
  n.max_factor = std::max(n.max_factor, f->factor);
  pending_ = {{"rank", f->rank}, {"factor", f->factor}};
  const bool news = f->rank != last_named_;
  last_named_ = f->rank;
  if (!news) return std::nullopt;
  return describe(*f, every);
}

nlohmann::json StragglerWatch::take_record() {
  nlohmann::json out = std::move(pending_);
  pending_ = nullptr;
  return out;
}

nlohmann::json StragglerWatch::summary() const {
  const Named* best = nullptr;
  int rank = -1;
  for (size_t r = 0; r < named_.size(); ++r) {
    if (named_[r].intervals > 0 && (!best || named_[r].intervals > best->intervals)) {
      best = &named_[r];
      rank = int(r);
    }
  }
  if (!best) return nlohmann::json::object();
  return {{"straggler",
           {{"rank", rank},
            {"factor", best->max_factor},
            {"intervals", best->intervals},
            {"first_step", best->first_step}}}};
}

}  // namespace cohort::train
