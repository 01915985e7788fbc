#pragma once
// ProcessGroupCohort: a c10d::ProcessGroup (torch 1.13) whose operations run on a cohort
// Communicator (cohort/comm/collectives.h), registered with torch.distributed as the "cohort"
// backend by python/cohort/torch/__init__.py (docs/python.md, "A torch.distributed backend").
//
// Every operation is issued asynchronously on the Communicator (which runs them in issue
// order on its worker thread) and returns a WorkCohort. A completion thread waits for the
// operations in that same order, copies results back where a tensor had to be staged (a
// non-contiguous tensor, a dtype the Communicator does not reduce natively), then completes
// the torch Work and its Future (what DDP's reducer and comm hooks wait on).
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
  // A send or receive is held back until it is needed (see ProcessGroupCohort::post_p2p).
  void ensure_posted();

  std::string name_;  // "allreduce" or the Communicator's "allreduce #12" once issued
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  // What the completion thread needs: the cohort operation, the buffers it reads and writes
  // (kept alive until it is done), and the copy back into the caller's tensors.
  comm::Work inner_;
  std::vector<at::Tensor> buffers_;
  std::function<void()> after_;
  // Set for a send or receive not posted yet: the group that holds it.
  std::atomic<ProcessGroupCohort*> unposted_in_{nullptr};
  std::exception_ptr error_;                 // mark_done's, for complete_future
  std::atomic<bool> future_claimed_{false};  // complete_future ran (or is running)
};

class ProcessGroupCohort : public c10d::ProcessGroup {
 public:
  // The group's timeout is the Communicator's (CommOptions::timeout).
  explicit ProcessGroupCohort(std::shared_ptr<comm::Communicator> comm);
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
  // Point-to-point. cohort's Communicator runs operations one after another, so an isend and
  // an irecv issued separately would run in turn: two ranks that both isend a large tensor
  // before their irecv would each wait for the other's receive (gloo lets them pass). So sends
  // and receives are held back and posted together, as one batch_send_recv (which moves them
  // all at once), when anything else is issued, or when one of them is waited for, polled
  // (is_completed) or asked for its future. The same rules as torch's: every isend/irecv is
  // eventually waited for, or followed by another operation.
  c10::intrusive_ptr<c10d::Work> hold_p2p(Launch l, comm::P2POp op);
  c10::intrusive_ptr<c10d::Work> point_to_point(comm::P2POp::Kind kind,
                                                std::vector<at::Tensor>& tensors, int peer,
                                                int tag);
  void post_p2p();         // takes issue_mu_
  void post_p2p_locked();  // under issue_mu_
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

  std::shared_ptr<comm::Communicator> comm_;
  // The Communicator takes operations from one thread at a time; torch may issue from several
  // (the autograd engine's DDP hooks and the main thread).
  std::mutex issue_mu_;
  // Sends and receives held back (under issue_mu_), in issue order.
  std::vector<std::pair<comm::P2POp, c10::intrusive_ptr<WorkCohort>>> held_p2p_;
  // Issued operations, oldest first, for the completion thread.
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<c10::intrusive_ptr<WorkCohort>> queue_;
  // Completed operations whose last reference the completion thread must not drop: their
  // tensors may own Python objects, and freeing one needs the GIL, which a thread that is not
  // Python's cannot take once the interpreter is exiting (it would be killed mid-unwind). The
  // next launch (a Python thread) or the destructor drops them.
  std::vector<c10::intrusive_ptr<WorkCohort>> completed_;
  bool stopping_ = false;
  std::thread completer_;
  CallbackPool callbacks_;  // completes the futures (callback_pool.h says why not completer_)
};

}  // namespace cohort::torch_plugin
