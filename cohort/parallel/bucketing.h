#pragma once
// GradBucketing: the one gradient-bucketing engine under DDP's reducer (reducer.h), ZeRO's
// gradient reductions (zero_grads.cc) and the parameter server's push overlap
// (ps/push_overlap.h). Each of those is a Policy on it: what a ready gradient is copied into,
// what a complete bucket launches, what the end of backward does.
//
// Protocol, per pass (one synced backward; every rank runs the same steps in the same order):
//   1. A pass starts either at the first grad-ready hook while the engine is enabled
//      (Start::first_hook: the policy's end_of_backward is then queued with
//      autograd::queue_callback, so it runs when the graph is done, before backward() returns)
//      or explicitly with arm() (Start::armed: hooks count only between arm() and disarm()).
//   2. Parameter p's hook hands p to the policy's `take` (put its final gradient in its
//      bucket), marks p ready and counts it off every bucket it feeds (a parameter may feed
//      several, e.g. a layout slot spanning two servers' key ranges). A second hook for p in the
//      same pass goes to `ready_twice` (unset: ignored).
//   3. A complete bucket is launched through the policy's `launch`, which returns its Work
//      (empty: nothing for the engine to wait for). Order::fixed launches bucket b only after
//      every bucket < b, so every rank issues the same collectives in the same order even when
//      gradients arrive out of order (determinism); Order::as_ready launches each bucket as it
//      completes (independent destinations, e.g. one push lane per server).
//   4. The policy ends the pass: mark_ready() for the parameters that got no gradient,
//      launch_rest(), then wait_all() (each Work's own deadline bounds the wait; an error is
//      rethrown with the policy's context) or its own waits through work(b).
// If the queued end_of_backward is dropped unrun (the graph or an earlier callback threw), the
// pass is abandoned: the next pass drains what is in flight first, and `abandoned` runs.
//
// Threads: hooks, callbacks and every method run on the thread that runs backward and owns the
// engine; the communicator's threads touch only the buffers of launched buckets.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cohort/comm/work.h"
#include "cohort/tensor/tensor.h"

namespace cohort::parallel {

// Which buckets each parameter feeds, and which are complete in this pass (no autograd, no
// communication: a pure counter).
class ReadyCounter {
 public:
  ReadyCounter() = default;
  // buckets_of[p]: the buckets parameter p feeds (each bucket < num_buckets).
  ReadyCounter(std::vector<std::vector<size_t>> buckets_of, size_t num_buckets);
  void reset();  // a new pass: nothing ready
  // p's gradient is final: appends to *done the buckets it completed. False (nothing counted)
  // when p was ready already in this pass.
  bool ready(size_t p, std::vector<size_t>* done);
  bool is_ready(size_t p) const { return ready_.at(p); }
  bool complete(size_t b) const { return pending_[b] == 0; }
  size_t num_params() const { return buckets_of_.size(); }
  size_t num_buckets() const { return members_.size(); }
  const std::vector<size_t>& ready_order() const { return order_; }  // this pass's

 private:
  std::vector<std::vector<size_t>> buckets_of_;  // by parameter
  std::vector<size_t> members_;                  // by bucket: parameters feeding it
  std::vector<size_t> pending_;                  // by bucket: of those, not ready yet
  std::vector<bool> ready_;                      // by parameter
  std::vector<size_t> order_;
};

// Whether `grad` already is `slot`, a parameter's place in its bucket (the same memory, shape
// and layout): a .grad made the slot by an earlier step, then accumulated into in place by
// backward, needs no copy into (or back from) the bucket.
bool is_bucket_slot(const Tensor& grad, const Tensor& slot);

class GradBucketing : public std::enable_shared_from_this<GradBucketing> {
 public:
  enum class Order { fixed, as_ready };
  enum class Start { first_hook, armed };
  struct Policy {
    std::function<void(size_t p)> take;          // optional: p's gradient is final: into its bucket
    std::function<comm::Work(size_t b)> launch;  // bucket b is complete: start its communication
    std::function<void()> begin;                 // optional: a pass starts
    std::function<void()> after_hook;            // optional: after each counted hook
    std::function<void()> end_of_backward;       // Start::first_hook: the queued end of the pass
    std::function<void()> abandoned;             // optional: end_of_backward was dropped
    std::function<void(size_t p)> ready_twice;   // optional: a second hook for p in one pass
  };

  GradBucketing(Order order, Start start, Policy policy);
  ~GradBucketing();  // drains in-flight buckets; never throws
  GradBucketing(const GradBucketing&) = delete;
  GradBucketing& operator=(const GradBucketing&) = delete;

  // Registers a grad-ready hook on each defined tensors[p] (an undefined one gets none: it is
  // never ready by hook). The hooks hold the engine weakly: once it is gone or detached they do
  // nothing (hooks cannot be unregistered).
  void install(const std::vector<Tensor>& tensors);
  void detach() { detached_ = true; }
  // New buckets (DDP's rebuild, or the first plan); between passes. Resets the pass.
  void set_plan(ReadyCounter plan);

  void set_enabled(bool on) { enabled_ = on; }  // Start::first_hook: off = hooks do nothing
  bool enabled() const { return enabled_; }
  void arm();  // Start::armed: resets the pass; hooks count from now
  void disarm() { armed_ = false; }
  bool armed() const { return armed_; }
  bool in_pass() const { return in_pass_; }
  void end_pass() { in_pass_ = false; }  // hooks of a Start::first_hook pass begin a new one
  void reset();                          // forget this pass: nothing ready, nothing launched

  // As a hook does, without the enabled/armed gate: take, count, launch.
  void mark_ready(size_t p);
  bool is_ready(size_t p) const { return counter_.is_ready(p); }
  const std::vector<size_t>& ready_order() const { return counter_.ready_order(); }
  void launch_ready();  // Order::fixed: every complete bucket whose predecessors are launched
  void launch_rest();   // every bucket not launched yet, in index order
  bool launched(size_t b) const { return launched_.at(b); }
  size_t num_launched() const { return launch_order_.size(); }
  size_t num_buckets() const { return counter_.num_buckets(); }
  comm::Work& work(size_t b) { return works_.at(b); }

  // In launch order: observes each launched bucket whose Work is done or empty, oldest first,
  // with on_done(b); stops at the first one still running (collectives complete in issue order).
  void poll(const std::function<void(size_t b)>& on_done);
  size_t num_done() const { return next_done_; }
  size_t oldest_running() const { return launch_order_.at(next_done_); }
  // Waits for every launched bucket in launch order; an error is rethrown prefixed with
  // context(b). on_done(b) (optional) for each one poll had not observed yet.
  void wait_all(const std::function<std::string(size_t b)>& context,
                const std::function<void(size_t b)>& on_done = {});
  // Waits for every launched bucket, ignoring errors (destructors, abandoned passes); never
  // runs a Work's continuation.
  void drain() noexcept;
  void abandon() noexcept;  // the queued end_of_backward was dropped unrun

 private:
  void on_hook(size_t p);
  void begin_pass();
  void launch(size_t b);

  Order order_;
  Start start_;
  Policy policy_;
  ReadyCounter counter_;
  bool enabled_ = true, armed_ = false, detached_ = false;
  bool in_pass_ = false;
  bool needs_drain_ = false;          // a pass was abandoned with buckets possibly in flight
  std::vector<comm::Work> works_;     // by bucket
  std::vector<bool> launched_;        // by bucket, this pass
  std::vector<size_t> launch_order_;  // this pass
  size_t next_fixed_ = 0;             // Order::fixed: the next bucket to launch
  size_t next_done_ = 0;              // into launch_order_: the oldest not observed done
  std::vector<size_t> completed_;     // scratch for ReadyCounter::ready
};

}  // namespace cohort::parallel
