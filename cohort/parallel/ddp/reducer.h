#pragma once
// Reducer: DDP's gradient averaging, overlapped with backward (after torch's reducer.cpp).
//
// The hooks, the ready counting, the launches in bucket order and the waits are the bucketing
// engine's (bucketing.h); the Reducer is its DDP policy. Per synced backward:
//   1. The first grad-ready hook of the pass starts an iteration; finalize() is queued to run
//      when the graph is done, before backward() returns.
//   2. Each hook copies the parameter's final .grad into its slot of its bucket's flat f32
//      buffer (gradient_as_bucket_view: and makes that slot the .grad; a .grad that already is
//      its slot needs no copy). Buckets are launched in index order (comm hook, default
//      allreduce avg); the communicator's worker thread runs them while backward continues.
//   3. finalize(): parameters that got no gradient are an error (find_unused_parameters off)
//      or contribute their current .grad (zero if none); remaining buckets are launched; every
//      bucket is waited for (the wait is the exposed communication); averaged values are copied
//      back into each .grad that is not its slot.
//   4. After the first synced step, buckets are rebuilt in the observed ready order. The
//      order is assumed identical on every rank (same model, deterministic engine); one
//      allgather of its hash checks that once.
// Under no_sync (sync off) hooks do nothing: .grad accumulates locally and the next synced
// step averages the accumulated sum.
//
// Threads: hooks, finalize and every method run on the thread that runs backward / owns the
// DDP. The communicator's worker thread touches only the flat buffers of launched buckets,
// which nothing else touches until their Work is done.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cohort/comm/process_group.h"
#include "cohort/parallel/bucketing.h"
#include "cohort/parallel/ddp/buckets.h"
#include "cohort/parallel/ddp/comm_hook.h"
#include "cohort/parallel/ddp/ddp_options.h"
#include "cohort/tensor/tensor.h"

namespace cohort::metrics {
class Tracer;
}

namespace cohort::parallel {

class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  using Clock = std::chrono::steady_clock;
  struct Param {
    std::string name;
    Tensor tensor;  // f32 leaf with requires_grad
  };

  Reducer(std::vector<Param> params, comm::ProcessGroup& group, DdpOptions options);
  ~Reducer();  // drains in-flight buckets; never throws
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Registers one grad-ready hook per parameter. The hooks hold a weak reference: once the
  // Reducer is gone or detached they do nothing (hooks cannot be unregistered).
  void install_hooks();
  void detach() { engine_->detach(); }  // hooks become no-ops from now on (DDP's destructor)

  // The hook each ready bucket is handed to (comm_hook.h); AllreduceHook until replaced.
  void set_comm_hook(std::shared_ptr<CommHook> hook) { hook_ = std::move(hook); }
  CommHook& comm_hook() const { return *hook_; }
  // Each bucket's communication becomes a span on the tracer's "comm" track (null: none): from
  // when the hook is called (its encoding included), or when the bucket before it completed if
  // later (collectives run one at a time, in issue order), to when the reducer saw the Work
  // done: at a later grad-ready hook or in the end-of-backward wait, so its end is late by at
  // most one hook's interval (as comm_s in DdpStepStats). The tracer outlives the reducer.
  void set_tracer(metrics::Tracer* tracer) { tracer_ = tracer; }
  void set_sync(bool on) { engine_->set_enabled(on); }
  bool sync() const { return engine_->enabled(); }
  const DdpStepStats& stats() const { return stats_; }
  int64_t synced_steps() const { return synced_steps_; }
  size_t num_buckets() const { return buckets_.size(); }
  // Called at the end of every synced step that completed (DDP's periodic check).
  void set_after_step(std::function<void(int64_t)> fn) { after_step_ = std::move(fn); }
  // Waits for every launched bucket, ignoring errors (destructor, abandoned passes).
  void drain() noexcept { engine_->drain(); }
  void abandon_iteration() noexcept {
    engine_->abandon();
  }  // the backward pass threw before finalize ran

 private:
  struct Bucket {
    BucketLayout layout;
    Tensor flat;      // [numel] f32
    GradBucket view;  // what the hook is handed; lives until the buckets are rebuilt
    Clock::time_point issued_at, launched_at, done_at;
  };
  struct Slot {
    size_t bucket = 0, index = 0;
  };

  void build_buckets(const std::vector<size_t>& order);
  void describe_buckets();
  Tensor bucket_buffer(size_t numel, bool* in_arena);
  GradBucketing::Policy policy();
  void begin_iteration();
  void on_abandoned();
  void take_grad(size_t p);
  comm::Work launch(size_t b);
  void observe_done(size_t b);
  void finalize();
  void finish_synced_step();
  void handle_unused();
  void wait_buckets();
  void copy_back();
  void record_stats(Clock::time_point graph_done, double exposed_s);
  void trace_buckets() const;
  void rebuild_from_ready_order(const std::vector<size_t>& order);
  void detach_grads_from_buckets();
  // gradient_as_bucket_view: each parameter's bucket slot becomes where backward writes its
  // next fresh gradient (TensorImpl::grad_destination), so mark_ready has nothing to copy.
  void arm_destinations();
  std::vector<int> module_groups() const;
  void disarm_destinations();
  Tensor slot_view(size_t p) const;
  std::string bucket_name(size_t b) const;

  std::vector<Param> params_;
  comm::ProcessGroup& group_;
  DdpOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<Slot> slots_;  // per parameter
  std::shared_ptr<GradBucketing> engine_;
  bool rebuilt_ = false;
  int64_t synced_steps_ = 0;
  std::function<void(int64_t)> after_step_;
  std::shared_ptr<CommHook> hook_ = std::make_shared<AllreduceHook>();
  DdpStepStats stats_;
  metrics::Tracer* tracer_ = nullptr;

  // Per iteration.
  Clock::time_point first_hook_;
  uint64_t sent0_ = 0, received0_ = 0;
};

}  // namespace cohort::parallel
