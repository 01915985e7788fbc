#pragma once
// ProcessGroupCohort: a c10d::ProcessGroup (torch 1.13) whose operations run on a cohort
// Communicator (cohort/comm/collectives.h), registered with torch.distributed as the "cohort"
// backend by python/cohort/torch/__init__.py (docs/python.md, "A torch.distributed backend").
//
// Every operation is issued asynchronously on the Communicator (which runs them in issue
// order on its worker thread) and returns a WorkCohort. A completion thread waits for the
// operations in that same order, copies results back where a tensor had to be staged (a
// non-contiguous tensor, a dtype the Communicator does not reduce natively), then completes
// the torch Work and its Future (what DDP's reducer and comm hooks wait on). A small
// collective waited for while nothing else is in flight runs on the waiting thread instead
// (COHORT_TORCH_INLINE_BYTES; "Held operations" below): no thread hand-off at all.
//
// Tensors must be dense and on the CPU; anything else, and the operations cohort does not
// offer, fail with a message that names the operation and says what to do instead.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "callback_pool.h"
#include "cohort/comm/communicator.h"

namespace cohort::torch_plugin {

class ProcessGroupCohort;

// The torch Work of one cohort operation.
class WorkCohort : public c10d::Work {
 public:
  WorkCohort(int rank, c10d::OpType type, std::string name, std::vector<at::Tensor> outputs);
  // timeout 0: until done (the operation's own deadline, the group's timeout, still applies).
  bool wait(std::chrono::milliseconds timeout) override;
  bool isCompleted() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  friend class ProcessGroupCohort;
  // Called once, by the completion thread: wakes wait() and isCompleted() at once.
  void mark_done(std::exception_ptr error);
  // Completes the future (running its callbacks) exactly once: on the group's callback pool, or
  // in wait() if that comes first, so that a plain wait() costs no extra thread hop.
  void complete_future();
  // A held operation (see "Held operations" below) is posted once it is needed; `waiting`:
  // by wait(), which may then run it on its own thread.
  void ensure_posted(bool waiting = false);

  std::string name_;  // "allreduce" or the Communicator's "allreduce #12" once issued
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  // What the completion thread needs: the cohort operation, the buffers it reads and writes
  // (kept alive until it is done), and the copy back into the caller's tensors.
  comm::Work inner_;
  std::vector<at::Tensor> buffers_;
  std::function<void()> after_;
  // Set for an operation held back and not posted yet: the group that holds it.
  std::atomic<ProcessGroupCohort*> unposted_in_{nullptr};
  std::exception_ptr error_;                 // mark_done's, for complete_future
  std::atomic<bool> future_claimed_{false};  // complete_future ran (or is running)
};

class ProcessGroupCohort : public c10d::ProcessGroup {
 public:
  // The group's timeout is the Communicator's (CommOptions::timeout). Collectives of at most
  // `hold_max_bytes` are held back (0: none; see "Held operations" below).
  ProcessGroupCohort(std::shared_ptr<comm::Communicator> comm, size_t hold_max_bytes);
  ~ProcessGroupCohort() override;

  const std::string getBackendName() const override { return "cohort"; }
  // How this rank reaches each peer ("shm", "tcp", "self"): for tests and logs.
  std::vector<std::string> transports() const;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

 private:
  // One operation to issue: `start` issues it on the Communicator (under issue_mu_); `buffers`
  // stay alive until it is done; `after` runs once it succeeded (copies results back).
  struct Launch {
    c10d::OpType type;
    const char* name;
    std::vector<at::Tensor> outputs;
    std::vector<at::Tensor> buffers;
    std::function<comm::Work(comm::Communicator&)> start;
    std::function<void()> after;
  };
  c10::intrusive_ptr<c10d::Work> launch(Launch l);
  c10::intrusive_ptr<WorkCohort> make_work(Launch& l);
  // Held operations. Some operations are not given to the Communicator when issued, but
  // held back (in issue order) until they are needed: when anything not held is issued, when
  // one of them is waited for, polled (is_completed) or asked for its future, or when the
  // group is destroyed. Then all are posted, in order.
  //   - Sends and receives. cohort's Communicator runs operations one after another, so an
  //     isend and an irecv issued separately would run in turn: two ranks that both isend a
  //     large tensor before their irecv would each wait for the other's receive (gloo lets them
  //     pass). Held, consecutive ones are posted as one batch_send_recv (which moves them all
  //     at once). The same rules as torch's: every isend/irecv is eventually waited for, or
  //     followed by another operation.
  //   - Collectives of at most hold_max_bytes: a wait() that finds its own collective held
  //     alone runs it on the waiting thread (Communicator::issue_inline) when nothing is in
  //     flight, with no hand-off to the Communicator's worker and the completion thread (4 KiB
  //     all_reduce 45 -> 6 us, docs/python.md). One nobody asks for is posted by the
  //     completion thread after kHeldFlush, so an async_op=True collective that a rank never
  //     waits for still completes for its peers.
  struct Held {
    c10::intrusive_ptr<WorkCohort> work;
    std::optional<comm::P2POp> p2p;                        // a send or receive,
    std::function<comm::Work(comm::Communicator&)> start;  // or a collective
  };
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kHeldFlush{2};
  c10::intrusive_ptr<c10d::Work> hold_p2p(Launch l, comm::P2POp op);
  void hold(Held h);
  // Posts every held operation; `waiter`: the Work a wait() is for. Takes issue_mu_, and
  // finishes the waiter's operation here if it ran here.
  void post_held(const WorkCohort* waiter);
  // Under issue_mu_; returns the waiter's Work when it ran here and must be finished here.
  c10::intrusive_ptr<WorkCohort> post_held_locked(const WorkCohort* waiter);
  void issue_held_collective(Held& h, bool run_here);
  size_t post_p2p_run(size_t first);
  // The completion thread's: posts held collectives older than kHeldFlush (none if a send or
  // receive is held among them: those wait for their own trigger).
  void flush_stale_held();
  c10::intrusive_ptr<c10d::Work> point_to_point(comm::P2POp::Kind kind,
                                                std::vector<at::Tensor>& tensors, int peer,
                                                int tag);
  friend class WorkCohort;
  // All-to-all as one batch of sends and receives: sends[p] goes to rank p, recvs[p] comes from
  // it (this rank's own block is copied).
  c10::intrusive_ptr<c10d::Work> exchange(c10d::OpType type, const char* name,
                                          std::vector<at::Tensor> outputs,
                                          std::vector<at::Tensor> sends,
                                          std::vector<at::Tensor> recvs,
                                          std::vector<std::function<void()>> after,
                                          std::chrono::milliseconds timeout);
  void completion_loop();
  // Waits on queue_cv_ for work or stopping (true) or for a look at held collectives (false).
  bool wait_for_queue(std::unique_lock<std::mutex>& lock);
  // Waits for `w`'s operation (without counting as a waiter: see comm::Work::wait_unobserved),
  // copies results back and marks it done.
  static void finish(WorkCohort& w);

  std::shared_ptr<comm::Communicator> comm_;
  // The Communicator takes operations from one thread at a time; torch may issue from several
  // (the autograd engine's DDP hooks and the main thread).
  std::mutex issue_mu_;
  const size_t hold_max_bytes_;
  // Operations held back (under issue_mu_), in issue order; how many are collectives (read by
  // the completion thread without issue_mu_), and since when the oldest of those is held.
  std::vector<Held> held_;
  std::atomic<int> held_collectives_{0};
  Clock::time_point held_since_;
  // The completion thread sleeps without a deadline (nothing held when it looked).
  std::atomic<bool> completer_untimed_{false};
  // Issued operations, oldest first, for the completion thread.
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<c10::intrusive_ptr<WorkCohort>> queue_;
  // Operations pushed to queue_ that the completion thread has not marked done yet. An
  // operation the Communicator ran on the caller (issue_inline) is finished on the caller's
  // thread only when this is 0, so operations still finish in issue order.
  size_t unfinished_ = 0;
  // Completed operations whose last reference the completion thread must not drop: their
  // tensors may own Python objects, and freeing one needs the GIL, which a thread that is not
  // Python's cannot take once the interpreter is exiting (it would be killed mid-unwind). The
  // next launch (a Python thread) or the destructor drops them.
  std::vector<c10::intrusive_ptr<WorkCohort>> completed_;
  bool stopping_ = false;
  std::thread completer_;
  CallbackPool callbacks_;  // completes the futures (callback_pool.h says why not completer_)
};

// Rethrows the error in flight from issuing an operation as the caller of a ProcessGroup
// method gets it: cohort's errors keep their type, with the backend named in front.
[[noreturn]] void rethrow_issue_error();

}  // namespace cohort::torch_plugin
