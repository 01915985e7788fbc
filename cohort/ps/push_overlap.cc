#include "cohort/ps/push_overlap.h"

#include <algorithm>

#include "cohort/core/error.h"

namespace cohort::ps {

std::vector<std::vector<size_t>> servers_of_slots(const Layout& layout,
                                                  const std::vector<KeyRange>& ranges) {
  std::vector<std::vector<size_t>> servers(layout.params.size());
  for (size_t p = 0; p < layout.params.size(); ++p) {
    const ParamSlot& s = layout.params[p];
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (std::max(s.offset, ranges[i].begin) >= std::min(s.offset + s.numel, ranges[i].end))
        continue;  // no key of this slot on server i
      servers[p].push_back(i);
    }
  }
  return servers;
}

RangeTracker::RangeTracker(const Layout& layout, const std::vector<KeyRange>& ranges)
    : counter_(servers_of_slots(layout, ranges), ranges.size()) {}

void RangeTracker::ready(size_t slot, std::vector<int>* done) {
  completed_.clear();
  counter_.ready(slot, &completed_);
  for (size_t i : completed_) done->push_back(int(i));
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
    : engine_(std::make_shared<parallel::GradBucketing>(
          parallel::GradBucketing::Order::as_ready, parallel::GradBucketing::Start::armed,
          parallel::GradBucketing::Policy{.launch = [this](size_t i) { return this->start(i); }})),
      start_(std::move(start)),
      in_backward_(ranges.size(), false),
      started_at_(ranges.size()) {
  engine_->set_plan(parallel::ReadyCounter(servers_of_slots(layout, ranges), ranges.size()));
}

void PushOverlap::install(const std::shared_ptr<PushOverlap>& self, const NamedTensors& params,
                          const Layout& layout) {
  std::vector<Tensor> tensors(layout.params.size());  // undefined: no hook
  for (size_t p = 0; p < layout.params.size(); ++p) {
    Tensor t = params.at(layout.params[p].index).second;
    if (!t.requires_grad() || !t.is_leaf()) continue;  // never ready: pushed by push_rest()
    tensors[p] = t;
  }
  self->engine_->install(tensors);
}

void PushOverlap::arm() {
  // A second synced backward before step() would push a step twice: the servers would refuse
  // it (BSP) or apply it twice (ASP). Say so here, naming the cause.
  COHORT_CHECK_ARG(!any_started(),
                   "ps strategy: a synced backward ran again before step() sent "
                   "the last one's pushes (call step() after each synced "
                   "backward; earlier micro-batches pass sync = false)");
  engine_->arm();
}

void PushOverlap::disarm() {
  if (!engine_->armed()) return;
  engine_->disarm();
  backward_end_ = Clock::now();
}

// Launched by a grad-ready hook (armed: in backward) or by push_rest (after backward).
comm::Work PushOverlap::start(size_t server) {
  in_backward_[server] = engine_->armed();
  started_at_[server] = Clock::now();
  start_(int(server));
  return {};  // the worker's lanes wait for the answers (push_lanes.h)
}

void PushOverlap::push_rest() {
  engine_->launch_rest();
}

bool PushOverlap::any_started() const {
  return engine_->num_launched() > 0;
}

OverlapStep PushOverlap::finish(const std::vector<Clock::time_point>& answered,
                                Clock::time_point done) {
  OverlapStep o;
  std::vector<TimeSpan> hidden;
  Clock::time_point first = done;
  for (size_t i = 0; i < in_backward_.size(); ++i) {
    if (!engine_->launched(i)) continue;
    first = std::min(first, started_at_[i]);
    if (!in_backward_[i]) continue;
    ++o.pushes_in_backward;
    hidden.emplace_back(started_at_[i], std::min(answered.at(i), backward_end_));
  }
  o.hidden_s = covered_seconds(std::move(hidden));
  o.push_pull_s = std::chrono::duration<double>(done - first).count();
  engine_->reset();
  in_backward_.assign(in_backward_.size(), false);
  return o;
}

}  // namespace cohort::ps
