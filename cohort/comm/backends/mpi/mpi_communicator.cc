// MpiCommunicator: MPI initialisation, the duplicated MPI_Comm, the operation queue and worker
// thread (the same issue-order rules as the native Communicator), and polling with deadlines.
#include <sched.h>

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include "cohort/comm/backends/mpi/mpi_internal.h"
#include "cohort/core/error.h"

namespace cohort::comm {

namespace mpi_detail {
namespace {

std::mutex g_env_mu;      // guards initialisation
std::mutex g_call_mu;     // serializes MPI calls below MPI_THREAD_MULTIPLE
bool g_serialize = true;  // set once by ensure_initialized()

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void ensure_initialized() {
  std::lock_guard<std::mutex> lock(g_env_mu);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  COHORT_CHECK_IO(!finalized, "mpi: MPI is already finalized; create communicators before exit");
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    COHORT_CHECK_IO(rc == MPI_SUCCESS, "mpi: MPI_Init_thread failed: ", error_string(rc));
    std::atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  // Asynchronous operations run on a worker thread, so at least SERIALIZED is needed.
  COHORT_CHECK_IO(provided >= MPI_THREAD_SERIALIZED, "mpi: the MPI library provides thread level ",
                  provided, "; the MPI backend needs MPI_THREAD_SERIALIZED or more");
  g_serialize = provided < MPI_THREAD_MULTIPLE;
}

}  // namespace

CallGuard::CallGuard() : locked_(g_serialize) {
  if (locked_) g_call_mu.lock();
}
CallGuard::~CallGuard() {
  if (locked_) g_call_mu.unlock();
}

std::string error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return detail::str("MPI error ", rc);
  return std::string(text, size_t(len));
}

}  // namespace mpi_detail

using mpi_detail::CallGuard;
using mpi_detail::error_string;

void MpiCommunicator::Call::check(int rc, const char* fn) const {
  if (rc != MPI_SUCCESS) throw IoError(detail::str(name, ": ", fn, " failed: ", error_string(rc)));
}

namespace {

// Spin briefly (latency), then yield, then sleep a little: MPI only progresses inside MPI
// calls, so the sleep stays short.
void back_off(int& polls) {
  ++polls;
  if (polls < 256) return;
  if (polls < 4096) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(20));
}

}  // namespace

namespace {

// Point-to-point requests still pending are cancelled and freed, so nothing writes the
// buffers after the call has thrown. (Collective requests cannot be cancelled in MPI.)
void cancel_pending(MPI_Request* requests, int n, const std::vector<MPI_Status>* statuses) {
  CallGuard guard;
  for (int i = 0; i < n; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    if (statuses && (*statuses)[size_t(i)].MPI_ERROR != MPI_ERR_PENDING) continue;
    MPI_Cancel(&requests[i]);
    MPI_Request_free(&requests[i]);
  }
}

}  // namespace

void MpiCommunicator::Call::wait(MPI_Request* requests, int n, bool cancellable,
                                 std::vector<MPI_Status>* out) {
  std::vector<MPI_Status> statuses(size_t(n > 0 ? n : 1));
  for (int polls = 0;;) {
    int flag = 0, rc;
    {
      CallGuard guard;
      rc = MPI_Testall(n, requests, &flag, statuses.data());
    }
    if (rc == MPI_ERR_IN_STATUS) {  // one request failed (MPI_ERR_TRUNCATE, a dead peer...)
      if (cancellable) cancel_pending(requests, n, &statuses);
      for (int i = 0; i < n; ++i) {
        int e = statuses[size_t(i)].MPI_ERROR;
        if (e != MPI_SUCCESS && e != MPI_ERR_PENDING) check(e, "request");
      }
    }
    check(rc, "MPI_Testall");
    if (flag) {
      if (out) out->assign(statuses.begin(), statuses.begin() + n);
      return;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    back_off(polls);
  }
  if (cancellable) cancel_pending(requests, n, nullptr);
  throw Timeout(detail::str(name, " timed out: MPI did not complete it before the deadline",
                            cancellable ? "" : " (the collective request is abandoned)",
                            "; check that every rank is alive and calls the same operations"));
}

struct MpiCommunicator::Impl {
  struct Queued {
    Op op;
    uint64_t seq;
    Work work;
  };
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  MpiOptions options;
  uint64_t next_seq = 0;
  std::string broken;  // the first IoError or Timeout; non-empty: refuse further operations

  // Lock order: mu only, never held while an operation runs.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Queued> queue;
  bool busy = false;  // an operation runs (on the worker or on a synchronous caller)
  bool stopping = false;
  std::thread worker;

  void execute(const Op& op, uint64_t seq);
  void worker_loop();
};

void MpiCommunicator::Impl::execute(const Op& op, uint64_t seq) {
  Call call;
  call.comm = comm;
  call.rank = rank;
  call.size = size;
  call.name =
      detail::str(op.kind, " #", seq, " on rank ", rank, " (mpi, ", op.kind, "(", op.what, "))");
  COHORT_CHECK_IO(broken.empty(), call.name,
                  ": the communicator is unusable after an earlier error (", broken,
                  "); build a new one");
  auto timeout = op.timeout.count() > 0 ? op.timeout : options.timeout;
  call.deadline = std::chrono::steady_clock::now() + timeout;
  call.blocking = options.blocking_collectives;
  try {
    op.body(call);
  } catch (const IoError& e) {
    broken = e.what();
    throw;
  } catch (const Timeout& e) {
    broken = e.what();
    throw;
  }
}

void MpiCommunicator::Impl::worker_loop() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    cv.wait(lock, [&] { return stopping || (!queue.empty() && !busy); });
    if (queue.empty()) return;  // stopping, and everything queued has run
    if (busy) continue;
    Queued q = std::move(queue.front());
    queue.pop_front();
    busy = true;
    lock.unlock();
    std::exception_ptr error;
    try {
      execute(q.op, q.seq);
    } catch (...) {
      error = std::current_exception();
    }
    q.work.complete(error);
    lock.lock();
    busy = false;
    cv.notify_all();
  }
}

MpiCommunicator::MpiCommunicator(std::unique_ptr<Impl> impl, MpiOptions options)
    : impl_(std::move(impl)), options_(options) {
  Impl& s = *impl_;
  MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(s.comm, &s.rank);
  MPI_Comm_size(s.comm, &s.size);
  s.options = options;
  rank_ = s.rank;
  size_ = s.size;
  s.worker = std::thread([&s] { s.worker_loop(); });
}

MpiCommunicator::~MpiCommunicator() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  impl_->worker.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    CallGuard guard;
    MPI_Comm_free(&impl_->comm);
  }
}

std::shared_ptr<MpiCommunicator> MpiCommunicator::create(MpiOptions options) {
  mpi_detail::ensure_initialized();
  auto impl = std::make_unique<Impl>();
  int rc;
  {
    CallGuard guard;
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &impl->comm);
  }
  COHORT_CHECK_IO(rc == MPI_SUCCESS,
                  "mpi: MPI_Comm_dup(MPI_COMM_WORLD) failed: ", error_string(rc));
  return std::shared_ptr<MpiCommunicator>(new MpiCommunicator(std::move(impl), options));
}

void MpiCommunicator::run(Op op) {
  uint64_t seq;
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    // A synchronous call first waits for the asynchronous ones issued before it.
    impl_->cv.wait(lock, [&] { return impl_->queue.empty() && !impl_->busy; });
    impl_->busy = true;
    seq = impl_->next_seq++;
  }
  struct Release {
    Impl& s;
    ~Release() {
      {
        std::lock_guard<std::mutex> lock(s.mu);
        s.busy = false;
      }
      s.cv.notify_all();
    }
  } release{*impl_};
  impl_->execute(op, seq);
}

Work MpiCommunicator::submit(Op op) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  uint64_t seq = impl_->next_seq++;
  Work work = Work::pending(detail::str(op.kind, " #", seq, " on rank ", impl_->rank, " (mpi)"));
  impl_->queue.push_back({std::move(op), seq, work});
  impl_->cv.notify_all();
  return work;
}

std::shared_ptr<MpiCommunicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  run({"split", detail::str("color=", color, ", key=", key), {}, [&](Call& call) {
         CallGuard guard;
         call.check(MPI_Comm_split(call.comm, color < 0 ? MPI_UNDEFINED : color, key, &out),
                    "MPI_Comm_split");
       }});
  if (out == MPI_COMM_NULL) return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->comm = out;
  return std::shared_ptr<MpiCommunicator>(new MpiCommunicator(std::move(impl), options_));
}

std::shared_ptr<MpiCommunicator> MpiCommunicator::new_group(const std::vector<int>& ranks) {
  int mine = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    COHORT_CHECK_ARG(ranks[i] >= 0 && ranks[i] < size_, "new_group on rank ", rank_, ": rank ",
                     ranks[i], " is not in [0, ", size_, ")");
    for (size_t j = 0; j < i; ++j) {
      COHORT_CHECK_ARG(ranks[j] != ranks[i], "new_group: rank ", ranks[i], " is listed twice");
    }
    if (ranks[i] == rank_) mine = int(i);
  }
  // Colour 0 with key = position gives exactly the listed order; others get no group.
  return split(mine < 0 ? -1 : 0, mine);
}

}  // namespace cohort::comm
