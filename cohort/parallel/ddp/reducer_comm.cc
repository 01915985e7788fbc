// The Reducer's collectives: bucket launches and the end of the pass (protocol steps 2-4 in
// reducer.h).
#include <algorithm>

#include "cohort/comm/communicator.h"
#include "cohort/metrics/trace.h"
#include "cohort/parallel/ddp/reducer.h"
#include "cohort/parallel/param_sync.h"

namespace cohort::parallel {
namespace {

double seconds(Reducer::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

comm::Work Reducer::launch(size_t b) {
  Bucket& bucket = buckets_[b];
  if (tracer_) bucket.issued_at = Clock::now();
  comm::Work work;
  try {
    work = hook_->run(group_, bucket.view);
    COHORT_CHECK_ARG(work.valid(), "comm hook '", hook_->name(), "' returned an empty Work");
  } catch (...) {
    rethrow_with_context(std::current_exception(), bucket_name(b) + ": cannot launch: ");
  }
  bucket.launched_at = Clock::now();
  return work;
}

// The end-of-backward callback (queued by the pass's first hook).
void Reducer::finalize() {
  Clock::time_point graph_done = Clock::now();
  try {
    handle_unused();
    engine_->launch_ready();
    COHORT_INTERNAL(engine_->num_launched() == buckets_.size(),
                    "DDP: ", buckets_.size() - engine_->num_launched(),
                    " bucket(s) not launched at the end of backward");
    Clock::time_point wait_start = Clock::now();
    wait_buckets();
    double exposed = seconds(Clock::now() - wait_start);
    copy_back();
    record_stats(graph_done, exposed);
    if (tracer_) trace_buckets();
  } catch (...) {
    engine_->drain();  // the flat buffers must outlive every launched collective
    engine_->reset();
    throw;
  }
  finish_synced_step();
}

void Reducer::finish_synced_step() {
  std::vector<size_t> order = engine_->ready_order();
  engine_->reset();
  ++synced_steps_;
  if (!rebuilt_) rebuild_from_ready_order(order);
  arm_destinations();
  if (after_step_) after_step_(synced_steps_);
}

void Reducer::handle_unused() {
  std::vector<size_t> unused;
  for (size_t p = 0; p < params_.size(); ++p) {
    if (!engine_->is_ready(p)) unused.push_back(p);
  }
  if (unused.empty()) return;
  if (!options_.find_unused_parameters) {
    std::string names;
    for (size_t k = 0; k < unused.size() && k < 8; ++k) {
      names += (k ? ", '" : "'") + params_[unused[k]].name + "'";
    }
    if (unused.size() > 8) names += detail::str(" and ", unused.size() - 8, " more");
    throw InvalidArgument(detail::str(
        "DDP: parameter(s) ", names, " received no gradient in this backward pass (rank ",
        group_.rank(),
        "). If some parameters are legitimately unused in a step, construct DDP "
        "with DdpOptions{.find_unused_parameters = true} (their gradient then counts as zero); "
        "otherwise make sure the loss depends on every parameter"));
  }
  // Reverse registration order, as in the initial bucket guess. A .grad left by no_sync
  // passes still counts; no .grad counts as zero.
  for (auto it = unused.rbegin(); it != unused.rend(); ++it) {
    engine_->mark_ready(*it);
  }
}

void Reducer::wait_buckets() {
  // A bucket not seen done during backward may have ended long before this look: observe_done
  // takes its own end time, not ours.
  engine_->wait_all(
      [this](size_t b) { return bucket_name(b) + ": " + hook_->name() + " failed: "; },
      [this](size_t b) { observe_done(b); });
}

void Reducer::copy_back() {
  for (size_t p = 0; p < params_.size(); ++p) {
    Tensor avg = slot_view(p);
    Tensor& param = params_[p].tensor;
    Tensor grad = param.grad();
    if (is_bucket_slot(grad, avg)) continue;  // gradient_as_bucket_view: averaged in place
    if (grad.defined()) {
      grad.copy_(avg);
    } else {
      param.set_grad(avg.clone_raw());  // unused with find_unused_parameters and no .grad
    }
  }
}

void Reducer::record_stats(Clock::time_point graph_done, double exposed_s) {
  stats_.backward_s = seconds(graph_done - first_hook_);
  stats_.exposed_s = exposed_s;
  // Collectives run one at a time in launch order on the worker thread: bucket b runs from
  // max(its launch, bucket b-1's completion) to its completion.
  stats_.comm_s = 0;
  Clock::time_point prev_done = first_hook_;
  for (const Bucket& b : buckets_) {
    Clock::time_point start = std::max(b.launched_at, prev_done);
    if (b.done_at > start) stats_.comm_s += seconds(b.done_at - start);
    prev_done = std::max(prev_done, b.done_at);
  }
  stats_.buckets = int(buckets_.size());
  stats_.bytes_sent = group_.bytes_sent() - sent0_;
  stats_.bytes_received = group_.bytes_received() - received0_;
}

// As in record_stats: bucket b occupies the communicator from max(its issue, bucket b-1's
// completion) to its completion, so the spans on the "comm" track do not overlap (a track's
// spans must nest for the viewers); the time it queued behind earlier buckets is in its args.
void Reducer::trace_buckets() const {
  Clock::time_point prev_done = first_hook_;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& k = buckets_[b];
    Clock::time_point start = std::max(k.issued_at, prev_done);
    prev_done = std::max(prev_done, k.done_at);
    tracer_->complete(
        detail::str(hook_->name(), " bucket ", b), "comm", start, k.done_at, "comm",
        {{"bucket", b},
         {"floats", k.layout.numel},
         {"step", synced_steps_ + 1},
         {"queued_us", std::chrono::duration<double, std::micro>(start - k.issued_at).count()}});
  }
}

// Once, after the first synced step: buckets follow the observed ready order from now on.
void Reducer::rebuild_from_ready_order(const std::vector<size_t>& order) {
  rebuilt_ = true;
  COHORT_INTERNAL(order.size() == params_.size(), "DDP: ready order has ", order.size(), " of ",
                  params_.size(), " parameters");
  std::vector<uint64_t> order64(order.begin(), order.end());
  uint64_t mine = hash_bytes(order64.data(), order64.size() * sizeof(uint64_t));
  std::vector<uint64_t> all(size_t(group_.size()));
  group_.allgather({.input = &mine,
                    .output = all.data(),
                    .count = 1,
                    .dtype = comm::DType::i64,
                    .timeout = options_.timeout});
  std::string differ;
  for (int r = 1; r < group_.size(); ++r) {
    if (all[size_t(r)] != all[0]) differ += detail::str(differ.empty() ? "" : ", ", r);
  }
  COHORT_CHECK_ARG(differ.empty(), "DDP: gradients became ready in a different order on rank(s) ",
                   differ,
                   " than on rank 0. DDP assumes every rank runs the same model and "
                   "the same forward (bucket order must match across ranks)");
  detach_grads_from_buckets();
  build_buckets(order);  // a new plan for the engine, and a fresh pass
}

// Gradients that are views of the old buckets get memory of their own, so that the old buckets
// are freed before the new ones are allocated: the arena then holds one set, not two.
void Reducer::detach_grads_from_buckets() {
  disarm_destinations();  // they hold views of the old buckets too
  for (size_t p = 0; p < params_.size(); ++p) {
    Tensor grad = params_[p].tensor.grad();
    if (is_bucket_slot(grad, slot_view(p))) params_[p].tensor.set_grad(grad.clone_raw());
  }
}

}  // namespace cohort::parallel
