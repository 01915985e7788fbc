#include "process_group_cohort.h"

#include "cohort/comm/collectives.h"
#include "cohort/core/error.h"
#include "tensor_buffers.h"

namespace cohort::torch_plugin {

using std::chrono::milliseconds;

// --- WorkCohort ---

WorkCohort::WorkCohort(int rank, c10d::OpType type, std::string name,
                       std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      name_(std::move(name)),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

void WorkCohort::ensure_posted(bool waiting) {
  if (ProcessGroupCohort* pg = unposted_in_.load()) pg->post_held(waiting ? this : nullptr);
}

bool WorkCohort::isCompleted() {
  ensure_posted();
  return c10d::Work::isCompleted();
}

c10::intrusive_ptr<c10::ivalue::Future> WorkCohort::getFuture() {
  ensure_posted();
  return future_;
}

bool WorkCohort::wait(std::chrono::milliseconds timeout) {
  // Only an untimed wait may run the operation here: the operation's own deadline is longer.
  ensure_posted(/*waiting=*/timeout == kNoTimeout);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Waiting on the operation itself first marks this thread as its waiter, so the transfer
  // polls hard (the completion thread waits unobserved). Its error comes from mark_done.
  try {
    if (timeout == kNoTimeout) {
      inner_.wait();
    } else {
      inner_.wait(timeout);
    }
  } catch (...) {
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_until(lock, deadline, [&] { return completed_; })) {
    TORCH_CHECK(false, "cohort backend: ", name_, " did not complete within ", timeout.count(),
                " ms (it keeps running until the group's timeout; wait again, or check that "
                "every rank issued it)");
  }
  lock.unlock();
  complete_future();  // whoever asks first: a wait() needs no hop to the callback pool
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void WorkCohort::mark_done(std::exception_ptr error) {
  // buffers_ and after_ stay: they die with this Work, on a Python thread (completed_).
  error_ = error;  // before finish(): complete_future reads it after a waiter woke
  finish(error);
}

void WorkCohort::complete_future() {
  if (future_claimed_.exchange(true)) return;
  NoGrad no_grad;  // callbacks run as they did on the completion thread
  if (error_) {
    future_->setError(error_);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

// --- ProcessGroupCohort ---

ProcessGroupCohort::ProcessGroupCohort(std::shared_ptr<comm::Communicator> comm,
                                       size_t hold_max_bytes)
    : c10d::ProcessGroup(comm->rank(), comm->size()),
      comm_(std::move(comm)),
      hold_max_bytes_(hold_max_bytes) {
  completer_ = std::thread([this] { completion_loop(); });
}

ProcessGroupCohort::~ProcessGroupCohort() {
  post_held(nullptr);  // a send nobody waited for still reaches its peer
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  completer_.join();      // after every issued operation completed (or hit its deadline)
  callbacks_.shutdown();  // and its future was completed
}

std::vector<std::string> ProcessGroupCohort::transports() const {
  std::vector<std::string> out;
  for (int p = 0; p < size_; ++p) out.emplace_back(comm_->transport_of(p));
  return out;
}

c10::intrusive_ptr<WorkCohort> ProcessGroupCohort::make_work(Launch& l) {
  std::vector<c10::intrusive_ptr<WorkCohort>> release;  // dropped here, on the caller's thread
  {
    std::lock_guard<std::mutex> queue(queue_mu_);
    release.swap(completed_);
  }
  auto work = c10::make_intrusive<WorkCohort>(rank_, l.type, l.name, std::move(l.outputs));
  work->buffers_ = std::move(l.buffers);
  work->after_ = std::move(l.after);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::launch(Launch l) {
  size_t bytes = 0;
  for (const at::Tensor& b : l.buffers) bytes += b.defined() ? b.nbytes() : 0;
  auto work = make_work(l);
  if (hold_max_bytes_ > 0 && bytes <= hold_max_bytes_) {
    hold({work, std::nullopt, std::move(l.start)});
    return work;
  }
  {
    std::lock_guard<std::mutex> issue(issue_mu_);
    post_held_locked(nullptr);  // operations held back before this one go first
    try {
      work->inner_ = l.start(*comm_);
    } catch (...) {
      rethrow_issue_error();
    }
    work->name_ = work->inner_.name().empty() ? l.name : work->inner_.name();
    std::lock_guard<std::mutex> queue(queue_mu_);  // under issue_mu_: the queue is issue order
    queue_.push_back(work);
    ++unfinished_;
  }
  queue_cv_.notify_one();
  return work;
}

void ProcessGroupCohort::finish(WorkCohort& w) {
  NoGrad no_grad;  // after_ copies into the caller's tensors, on whichever thread finishes
  std::exception_ptr error;
  try {
    w.inner_.wait_unobserved();
    if (w.after_) w.after_();
  } catch (...) {
    error = std::current_exception();
  }
  w.mark_done(error);
}

bool ProcessGroupCohort::wait_for_queue(std::unique_lock<std::mutex>& lock) {
  auto ready = [&] { return stopping_ || !queue_.empty(); };
  if (held_collectives_.load() > 0) return queue_cv_.wait_for(lock, kHeldFlush, ready);
  // Untimed: a thread that holds a collective back rings (see hold()); seq_cst on both flags.
  completer_untimed_.store(true);
  queue_cv_.wait(lock, [&] { return ready() || held_collectives_.load() > 0; });
  completer_untimed_.store(false);
  return ready();
}

void ProcessGroupCohort::completion_loop() {
  NoGrad no_grad;
  for (;;) {
    c10::intrusive_ptr<WorkCohort> w;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      if (!wait_for_queue(lock)) {
        lock.unlock();
        flush_stale_held();
        continue;
      }
      if (queue_.empty()) return;  // stopping, and everything issued is done
      w = queue_.front();
      queue_.pop_front();
    }
    finish(*w);
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      --unfinished_;
    }
    // The future on the pool: its callbacks may wait for the operations queued after this one.
    callbacks_.post([this, w = std::move(w)]() mutable {
      w->complete_future();
      std::lock_guard<std::mutex> lock(queue_mu_);
      completed_.push_back(std::move(w));
    });
  }
}

// --- reductions ---

namespace {

// The collective of all_reduce and all_reduce_coalesced: `buf` reduced in place.
std::function<comm::Work(comm::Communicator&)> allreduce_in_place(const at::Tensor& buf,
                                                                  const ReduceTarget& target,
                                                                  milliseconds timeout) {
  return [=](comm::Communicator& c) {
    return comm::allreduce_async(c, {.output = ptr(buf),
                                     .count = size_t(buf.numel()),
                                     .dtype = target.dtype,
                                     .op = target.op,
                                     .timeout = timeout});
  };
}

// The collective of reduce_scatter and reduce_scatter_tensor: `in` (every rank's block) into
// `buf` (this rank's).
std::function<comm::Work(comm::Communicator&)> reduce_scatter_into(const at::Tensor& in,
                                                                   const at::Tensor& buf,
                                                                   const ReduceTarget& target,
                                                                   milliseconds timeout) {
  return [=](comm::Communicator& c) {
    return comm::reduce_scatter_async(c, {.input = ptr(in),
                                          .output = ptr(buf),
                                          .count = size_t(buf.numel()),
                                          .dtype = target.dtype,
                                          .op = target.op,
                                          .timeout = timeout});
  };
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  NoGrad no_grad;
  check_single(tensors, "all_reduce");
  const at::Tensor& t = tensors[0];
  const milliseconds timeout = op_timeout(opts.timeout);
  AfterList after;
  if (is_bitwise(opts.reduceOp)) {
    check_bitwise(t, opts.reduceOp, "all_reduce");
    at::Tensor in = t.contiguous();
    at::Tensor rows = at::empty({size_, t.numel()}, t.options());
    after.push_back([t, rows, op = opts.reduceOp]() mutable {
      t.copy_(fold_bitwise(rows, op).view(t.sizes()));
    });
    return launch({c10d::OpType::ALLREDUCE,
                   "all_reduce",
                   {t},
                   {in, rows},
                   allgather_bytes(in, rows, timeout),
                   run_all(std::move(after))});
  }
  ReduceTarget target = reduce_target(t.scalar_type(), opts.reduceOp, "all_reduce");
  at::Tensor buf = reduce_buffer(t, target, /*writes=*/true, after);
  return launch({c10d::OpType::ALLREDUCE,
                 "all_reduce",
                 {t},
                 {buf},
                 allreduce_in_place(buf, target, timeout),
                 run_all(std::move(after))});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  NoGrad no_grad;
  TORCH_CHECK(!tensors.empty(), "cohort backend: all_reduce_coalesced got no tensors");
  check_tensor(tensors[0], "all_reduce_coalesced");
  for (const auto& t : tensors) {
    check_tensor(t, "all_reduce_coalesced");
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "cohort backend: all_reduce_coalesced needs tensors of one dtype (got ",
                tensors[0].scalar_type(), " and ", t.scalar_type(), ")");
  }
  ReduceTarget target =
      reduce_target(tensors[0].scalar_type(), opts.reduceOp, "all_reduce_coalesced");
  // bool is concatenated as uint8 (0/1), reduced with its logical op and copied back.
  at::Tensor buf = concat(tensors, target.staged);
  AfterList after;
  copy_blocks_back(buf, tensors, after);
  const milliseconds timeout = op_timeout(opts.timeout);
  return launch({c10d::OpType::ALLREDUCE_COALESCED,
                 "all_reduce_coalesced",
                 tensors,
                 {buf},
                 allreduce_in_place(buf, target, timeout),
                 run_all(std::move(after))});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  NoGrad no_grad;
  check_single(tensors, "reduce");
  const at::Tensor& t = tensors[0];
  ReduceTarget target = reduce_target(t.scalar_type(), opts.reduceOp, "reduce");
  AfterList after;
  const int root = int(opts.rootRank);
  at::Tensor buf = reduce_buffer(t, target, /*writes=*/rank_ == root, after);
  const milliseconds timeout = op_timeout(opts.timeout);
  return launch({c10d::OpType::REDUCE,
                 "reduce",
                 {t},
                 {buf},
                 [=](comm::Communicator& c) {
                   // In place on the root; read from `buf` elsewhere.
                   const bool is_root = c.rank() == root;
                   return comm::reduce_async(c, {.input = is_root ? nullptr : ptr(buf),
                                                 .output = is_root ? ptr(buf) : nullptr,
                                                 .count = size_t(buf.numel()),
                                                 .dtype = target.dtype,
                                                 .op = target.op,
                                                 .root = root,
                                                 .timeout = timeout});
                 },
                 run_all(std::move(after))});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  NoGrad no_grad;
  check_single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == size_t(size_),
              "cohort backend: reduce_scatter takes one input list of ", size_,
              " tensors (one per rank)");
  const at::Tensor& out = outputs[0];
  check_same(inputs[0], out, "reduce_scatter", "input_list");
  ReduceTarget target = reduce_target(out.scalar_type(), opts.reduceOp, "reduce_scatter");
  at::Tensor in = concat(inputs[0], target.staged);
  AfterList after;
  at::Tensor buf = reduce_buffer(out, target, /*writes=*/true, after);
  const milliseconds timeout = op_timeout(opts.timeout);
  return launch({c10d::OpType::REDUCE_SCATTER,
                 "reduce_scatter",
                 {out},
                 {in, buf},
                 reduce_scatter_into(in, buf, target, timeout),
                 run_all(std::move(after))});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  NoGrad no_grad;
  check_tensor(output, "reduce_scatter_tensor");
  check_tensor(input, "reduce_scatter_tensor");
  TORCH_CHECK(
      input.scalar_type() == output.scalar_type() && input.numel() == output.numel() * size_,
      "cohort backend: reduce_scatter_tensor needs an input of ", size_,
      " x the output's elements, of the output's dtype (got ", input.numel(), " ",
      input.scalar_type(), " for ", output.numel(), " ", output.scalar_type(), ")");
  ReduceTarget target = reduce_target(output.scalar_type(), opts.reduceOp, "reduce_scatter");
  AfterList after;
  at::Tensor in = reduce_buffer(input, target, /*writes=*/false, after);
  at::Tensor buf = reduce_buffer(output, target, /*writes=*/true, after);
  const milliseconds timeout = op_timeout(opts.timeout);
  return launch({c10d::OpType::_REDUCE_SCATTER_BASE,
                 "reduce_scatter_tensor",
                 {output},
                 {in, buf},
                 reduce_scatter_into(in, buf, target, timeout),
                 run_all(std::move(after))});
}

}  // namespace cohort::torch_plugin
