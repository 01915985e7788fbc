#include "cohort/ps/consistency.h"

#include <algorithm>
#include <limits>

#include "cohort/core/error.h"

namespace cohort::ps {

Mode parse_mode(const std::string& s) {
  if (s == "bsp") return Mode::kBsp;
  if (s == "asp") return Mode::kAsp;
  if (s == "ssp") return Mode::kSsp;
  throw InvalidArgument("ps.mode = '" + s + "': expected 'bsp', 'asp' or 'ssp'");
}

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kBsp:
      return "bsp";
    case Mode::kAsp:
      return "asp";
    case Mode::kSsp:
      return "ssp";
  }
  return "?";
}

SspGate::SspGate(int num_workers, int64_t staleness)
    : staleness_(staleness), clock_(size_t(num_workers), 0), left_(size_t(num_workers), false) {
  COHORT_CHECK_ARG(num_workers >= 1, "SspGate: need at least one worker");
  COHORT_CHECK_ARG(staleness >= 0 || staleness == kUnbounded, "ps.staleness must be >= 0, got ",
                   staleness);
}

int64_t SspGate::slowest() const {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
  for (size_t r = 0; r < clock_.size(); ++r) {
    hi = std::max(hi, clock_[r]);
    if (!left_[r]) lo = std::min(lo, clock_[r]);
  }
  return lo == std::numeric_limits<int64_t>::max() ? hi : lo;
}

int64_t SspGate::push(int rank) {
  // The step it pushes against the slowest clock before the push (the slowest pushing has
  // lead 0: its step equals its own clock).
  const int64_t step = clock_.at(size_t(rank));
  const int64_t lead = std::max<int64_t>(0, step - slowest());
  ++clock_[size_t(rank)];
  return lead;
}

bool SspGate::may_proceed(int rank) const {
  if (staleness_ == kUnbounded) return true;
  return slowest() >= clock_.at(size_t(rank)) - staleness_;
}

void SspGate::restore(const std::vector<int64_t>& clocks) {
  COHORT_CHECK_ARG(clocks.size() == clock_.size(), "SspGate: ", clocks.size(),
                   " worker clocks for ", clock_.size(), " workers");
  for (int64_t c : clocks) COHORT_CHECK_ARG(c >= 0, "SspGate: negative clock ", c);
  clock_ = clocks;
}

void SspGate::leave(int rank) {
  left_.at(size_t(rank)) = true;
}

void SspGate::rejoin(int rank) {
  left_.at(size_t(rank)) = false;
}

StepIntervals::StepIntervals(int num_workers)
    : intervals_(size_t(num_workers)), answered_at_(size_t(num_workers)) {}

void StepIntervals::answered(int rank, Clock::time_point t) {
  answered_at_.at(size_t(rank)) = t;
}

void StepIntervals::pushed(int rank, Clock::time_point t) {
  auto& a = answered_at_.at(size_t(rank));
  if (!a) return;
  intervals_[size_t(rank)].push_back(std::chrono::duration<double>(t - *a).count());
  a.reset();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + long(mid), v.end());
  return v[mid];
}

double StepIntervals::median_s(int rank) const {
  return median(intervals_.at(size_t(rank)));
}

std::optional<Straggler> find_straggler(const StepIntervals& s, double factor) {
  const int n = s.num_workers();
  if (n < 2) return std::nullopt;
  std::vector<double> m(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    m[size_t(r)] = s.median_s(r);
    if (m[size_t(r)] <= 0) return std::nullopt;
  }
  const int slow = int(std::max_element(m.begin(), m.end()) - m.begin());
  std::vector<double> others;
  for (int r = 0; r < n; ++r) {
    if (r != slow) others.push_back(m[size_t(r)]);
  }
  Straggler st{slow, m[size_t(slow)], median(others)};
  if (st.median_s < factor * st.others_median_s) return std::nullopt;
  return st;
}

}  // namespace cohort::ps
