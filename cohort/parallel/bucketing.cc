// The gradient-bucketing engine (protocol in bucketing.h).
#include "cohort/parallel/bucketing.h"

#include "cohort/autograd/engine.h"
#include "cohort/core/error.h"

namespace cohort::parallel {
namespace {

// Rides in the queued end-of-backward callback. If the autograd engine drops the callback (the
// graph or an earlier callback threw), the token dies unrun and tells the bucketing engine that
// this pass is abandoned, so the next pass starts clean instead of believing it is still in one.
struct EndToken {
  std::weak_ptr<GradBucketing> engine;
  bool ran = false;
  ~EndToken() {
    if (ran) return;
    if (auto e = engine.lock()) e->abandon();
  }
};

}  // namespace

bool is_bucket_slot(const Tensor& grad, const Tensor& slot) {
  return grad.defined() && grad.impl().storage == slot.impl().storage &&
         grad.offset() == slot.offset() && grad.shape() == slot.shape() && grad.is_contiguous();
}

ReadyCounter::ReadyCounter(std::vector<std::vector<size_t>> buckets_of, size_t num_buckets)
    : buckets_of_(std::move(buckets_of)), members_(num_buckets, 0) {
  for (const auto& buckets : buckets_of_) {
    for (size_t b : buckets) {
      COHORT_INTERNAL(b < num_buckets, "bucket plan names bucket ", b, " of ", num_buckets);
      ++members_[b];
    }
  }
  reset();
}

void ReadyCounter::reset() {
  pending_ = members_;
  ready_.assign(buckets_of_.size(), false);
  order_.clear();
}

bool ReadyCounter::ready(size_t p, std::vector<size_t>* done) {
  if (ready_.at(p)) return false;
  ready_[p] = true;
  order_.push_back(p);
  for (size_t b : buckets_of_[p])
    if (--pending_[b] == 0) done->push_back(b);
  return true;
}

GradBucketing::GradBucketing(Order order, Start start, Policy policy)
    : order_(order), start_(start), policy_(std::move(policy)) {}

GradBucketing::~GradBucketing() {
  drain();
}

void GradBucketing::install(const std::vector<Tensor>& tensors) {
  std::weak_ptr<GradBucketing> weak = weak_from_this();
  for (size_t p = 0; p < tensors.size(); ++p) {
    if (!tensors[p].defined()) continue;
    Tensor t = tensors[p];
    t.register_grad_ready_hook([weak, p](Tensor&) {
      if (auto self = weak.lock()) self->on_hook(p);
    });
  }
}

void GradBucketing::set_plan(ReadyCounter plan) {
  counter_ = std::move(plan);
  works_.assign(counter_.num_buckets(), comm::Work());
  reset();
}

void GradBucketing::reset() {
  in_pass_ = false;
  counter_.reset();
  launched_.assign(counter_.num_buckets(), false);
  launch_order_.clear();
  for (comm::Work& w : works_) w = comm::Work();
  next_fixed_ = 0;
  next_done_ = 0;
}

void GradBucketing::arm() {
  reset();
  armed_ = true;
}

void GradBucketing::on_hook(size_t p) {
  if (detached_) return;
  if (start_ == Start::armed) {
    if (!armed_) return;  // an accumulating micro-batch, or a backward outside the owner
  } else {
    if (!enabled_) return;  // no_sync: .grad just accumulates
    if (!in_pass_) begin_pass();
  }
  if (counter_.is_ready(p)) {
    if (policy_.ready_twice) policy_.ready_twice(p);
    return;
  }
  mark_ready(p);
  if (policy_.after_hook) policy_.after_hook();
}

void GradBucketing::begin_pass() {
  if (needs_drain_) drain();
  reset();
  in_pass_ = true;
  if (policy_.begin) policy_.begin();
  auto token = std::make_shared<EndToken>();
  token->engine = weak_from_this();
  autograd::queue_callback([token, end = policy_.end_of_backward] {
    token->ran = true;
    if (auto alive = token->engine.lock()) end();
  });
}

void GradBucketing::mark_ready(size_t p) {
  if (counter_.is_ready(p)) return;
  if (policy_.take) policy_.take(p);
  completed_.clear();
  counter_.ready(p, &completed_);
  if (completed_.empty()) return;
  if (order_ == Order::fixed) {
    launch_ready();
  } else {
    // Copied: a launch may run a policy that marks further parameters ready.
    std::vector<size_t> done = completed_;
    for (size_t b : done) launch(b);
  }
}

void GradBucketing::launch_ready() {
  while (next_fixed_ < counter_.num_buckets() && counter_.complete(next_fixed_)) {
    launch(next_fixed_++);
  }
}

void GradBucketing::launch_rest() {
  for (size_t b = 0; b < counter_.num_buckets(); ++b) launch(b);
  next_fixed_ = counter_.num_buckets();
}

void GradBucketing::launch(size_t b) {
  if (launched_[b]) return;
  launched_[b] = true;
  works_[b] = policy_.launch(b);
  launch_order_.push_back(b);
}

void GradBucketing::poll(const std::function<void(size_t b)>& on_done) {
  while (next_done_ < launch_order_.size()) {
    const size_t b = launch_order_[next_done_];
    if (works_[b].valid() && !works_[b].done()) return;
    ++next_done_;
    on_done(b);
  }
}

void GradBucketing::wait_all(const std::function<std::string(size_t b)>& context,
                             const std::function<void(size_t b)>& on_done) {
  for (size_t i = 0; i < launch_order_.size(); ++i) {
    const size_t b = launch_order_[i];
    try {
      if (works_[b].valid()) works_[b].wait();  // bounded by the operation's own deadline
    } catch (...) {
      rethrow_with_context(std::current_exception(), context(b));
    }
    if (i < next_done_) continue;
    next_done_ = i + 1;
    if (on_done) on_done(b);
  }
}

void GradBucketing::drain() noexcept {
  for (comm::Work& w : works_) {
    // Bounded by the operations' own deadlines; never runs a continuation (a collective issued
    // now could hang peers that are not in this pass any more), never throws: the pass that
    // launched it is failing or gone, and its error was (or will be) reported.
    if (w.valid()) w.wait_issued();
  }
  needs_drain_ = false;
}

void GradBucketing::abandon() noexcept {
  in_pass_ = false;
  needs_drain_ = true;
  if (policy_.abandoned) policy_.abandoned();
}

}  // namespace cohort::parallel
