#pragma once
// Private to the MPI backend: the only header that includes <mpi.h>.
#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

#include "cohort/comm/backends/mpi/mpi_backend.h"

namespace cohort::comm {

// One running operation: its communicator, name and deadline. The body posts non-blocking MPI
// calls through post() and completes them with wait().
struct MpiCommunicator::Call {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  std::string name;  // "allreduce #3 on rank 1 (allreduce(count=10, f32, sum))"
  std::chrono::steady_clock::time_point deadline;
  bool blocking = false;  // MpiOptions::blocking_collectives

  // Throws IoError naming the op, the rank and the MPI function when rc is not MPI_SUCCESS.
  void check(int rc, const char* fn) const;
  // Waits for every request until the deadline, polling (so no rank hangs past it). On Timeout
  // the point-to-point requests still pending are cancelled; collective ones are abandoned.
  // `statuses` (n of them), if given, receives each request's status.
  void wait(MPI_Request* requests, int n, bool cancellable,
            std::vector<MPI_Status>* statuses = nullptr);
  void wait(MPI_Request& r, bool cancellable = false) { wait(&r, 1, cancellable); }
};

namespace mpi_detail {

// Serializes MPI calls when the library gave less than MPI_THREAD_MULTIPLE.
class CallGuard {
 public:
  CallGuard();
  ~CallGuard();
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;

 private:
  bool locked_;
};

// The MPI datatype that carries `t` (f16 and bf16 travel as 2-byte words).
MPI_Datatype datatype(DType t);
// The MPI op that reduces `t` with `op` (avg: sum; the caller divides). f16/bf16 use
// user-defined ops that widen to float.
MPI_Op reduce_op(DType t, ReduceOp op);
std::string error_string(int rc);

// Argument checks shared by the collectives (InvalidArgument naming the op and the rank).
int int_count(const char* op, const MpiCommunicator& c, size_t count);
void check_buffer(const char* op, const MpiCommunicator& c, DType dtype, size_t count,
                  const void* buffer, const char* buffer_name);
void check_root(const char* op, const MpiCommunicator& c, int root);
void check_auto(const char* op, Algorithm a);
std::string describe(size_t count, DType dtype);  // "count=10, f32"

// The MPI datatype and op of a reduction, looked up before any CallGuard is taken (reduce_op
// may create the user-defined ops).
struct Reduction {
  MPI_Datatype type;
  MPI_Op op;
};
Reduction reduction(const char* name, DType dtype, ReduceOp op);

// Runs one collective: with MpiOptions::blocking_collectives the blocking MPI call (block()
// returns its error code; no deadline), else the non-blocking one (post(&request)) under the
// guard, polled until the deadline. fn names the blocking call; errors name it.
template <typename Block, typename Post>
void collective(MpiCommunicator::Call& call, const char* fn, Block&& block, Post&& post) {
  if (call.blocking) {
    CallGuard guard;
    call.check(block(), fn);
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  {
    CallGuard guard;
    call.check(post(&request), fn);
  }
  call.wait(request);
}

}  // namespace mpi_detail
}  // namespace cohort::comm

// Defines op(c, o), which runs op_op(c, o) now, and op_async(c, o), which queues it.
#define COHORT_MPI_PAIR(name, Options)                      \
  void name(MpiCommunicator& c, const Options& o) {         \
    c.run(name##_op(c, o));                                 \
  }                                                         \
  Work name##_async(MpiCommunicator& c, const Options& o) { \
    return c.submit(name##_op(c, o));                       \
  }
