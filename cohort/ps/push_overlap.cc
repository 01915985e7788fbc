#include "cohort/ps/push_overlap.h"

#include <algorithm>

#include "cohort/core/error.h"

namespace cohort::ps {

RangeTracker::RangeTracker(const Layout& layout, const std::vector<KeyRange>& ranges)
    : servers_of_(layout.params.size()), slots_of_(ranges.size(), 0) {
  for (size_t p = 0; p < layout.params.size(); ++p) {
    const ParamSlot& s = layout.params[p];
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (std::max(s.offset, ranges[i].begin) >= std::min(s.offset + s.numel, ranges[i].end))
        continue;  // no key of this slot on server i
      servers_of_[p].push_back(int(i));
      ++slots_of_[i];
    }
  }
  reset();
}

void RangeTracker::reset() {
  pending_ = slots_of_;
  seen_.assign(servers_of_.size(), false);
}

void RangeTracker::ready(size_t slot, std::vector<int>* done) {
  if (seen_.at(slot)) return;
  seen_[slot] = true;
  for (int i : servers_of_[slot])
    if (--pending_[size_t(i)] == 0) done->push_back(i);
}

double covered_seconds(std::vector<TimeSpan> spans) {
  std::sort(spans.begin(), spans.end());
  double total = 0;
  bool open = false;
  TimeSpan cur;
  for (const TimeSpan& s : spans) {
    if (s.second <= s.first) continue;
    if (open && s.first <= cur.second) {
      cur.second = std::max(cur.second, s.second);
      continue;
    }
    if (open) total += std::chrono::duration<double>(cur.second - cur.first).count();
    cur = s;
    open = true;
  }
  if (open) total += std::chrono::duration<double>(cur.second - cur.first).count();
  return total;
}

PushOverlap::PushOverlap(const Layout& layout, const std::vector<KeyRange>& ranges, StartPush start)
    : tracker_(layout, ranges),
      start_(std::move(start)),
      started_(ranges.size(), false),
      in_backward_(ranges.size(), false),
      started_at_(ranges.size()) {}

void PushOverlap::install(const std::shared_ptr<PushOverlap>& self, const NamedTensors& params,
                          const Layout& layout) {
  std::weak_ptr<PushOverlap> weak = self;
  for (size_t p = 0; p < layout.params.size(); ++p) {
    Tensor t = params.at(layout.params[p].index).second;
    if (!t.requires_grad() || !t.is_leaf()) continue;  // never ready: pushed by push_rest()
    t.register_grad_ready_hook([weak, p](Tensor&) {
      if (auto o = weak.lock()) o->on_ready(p);
    });
  }
}

void PushOverlap::arm() {
  // A second synced backward before step() would push a step twice: the servers would refuse
  // it (BSP) or apply it twice (ASP). Say so here, naming the cause.
  COHORT_CHECK_ARG(!any_started(),
                   "ps strategy: a synced backward ran again before step() sent "
                   "the last one's pushes (call step() after each synced "
                   "backward; earlier micro-batches pass sync = false)");
  tracker_.reset();
  armed_ = true;
}

void PushOverlap::disarm() {
  if (!armed_) return;
  armed_ = false;
  backward_end_ = Clock::now();
}

void PushOverlap::on_ready(size_t slot) {
  if (!armed_) return;  // an accumulating micro-batch, or a backward outside the strategy
  done_.clear();
  tracker_.ready(slot, &done_);
  for (int i : done_) start(i, true);
}

void PushOverlap::start(int server, bool in_backward) {
  const size_t i = size_t(server);
  if (started_[i]) return;
  started_[i] = true;
  in_backward_[i] = in_backward;
  started_at_[i] = Clock::now();
  start_(server);
}

void PushOverlap::push_rest() {
  for (size_t i = 0; i < started_.size(); ++i) start(int(i), false);
}

bool PushOverlap::any_started() const {
  return std::find(started_.begin(), started_.end(), true) != started_.end();
}

OverlapStep PushOverlap::finish(const std::vector<Clock::time_point>& answered,
                                Clock::time_point done) {
  OverlapStep o;
  std::vector<TimeSpan> hidden;
  Clock::time_point first = done;
  for (size_t i = 0; i < started_.size(); ++i) {
    if (!started_[i]) continue;
    first = std::min(first, started_at_[i]);
    if (!in_backward_[i]) continue;
    ++o.pushes_in_backward;
    hidden.emplace_back(started_at_[i], std::min(answered.at(i), backward_end_));
  }
  o.hidden_s = covered_seconds(std::move(hidden));
  o.push_pull_s = std::chrono::duration<double>(done - first).count();
  started_.assign(started_.size(), false);
  in_backward_.assign(in_backward_.size(), false);
  return o;
}

}  // namespace cohort::ps
