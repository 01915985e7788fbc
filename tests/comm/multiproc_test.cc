// Ranks as real processes (fork): allreduce over shm and tcp with an authenticated TcpStore,
// and a rank killed with SIGKILL mid-job, which the others must report as an IoError naming it
// within their deadline. Children report through their exit status (gtest runs in the parent).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "tests/comm/collective_util.h"
#include "tests/comm/fork_ranks.h"
#include "tests/comm/process_job.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;
using std::chrono::milliseconds;
using transport::TransportKind;

enum Exit { kOk = 0, kWrongResult = 1, kUnexpectedError = 2, kNoError = 3, kChildTimeout = 99 };

// Every rank: allreduce sum and avg over a prime count, f32 and bf16, checked exactly.
int allreduce_child(const Job& job, int rank) {
  auto c = Communicator::create(connect_store(job), rank, job.size, job_options(job));
  for (DType t : {DType::f32, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      size_t count = 1009;
      auto buf = make_input(t, op, rank, count);
      allreduce(*c, {.output = buf.data(), .count = count, .dtype = t, .op = op});
      auto want = reference(t, op, job.size, count);
      std::string diff = compare(t, buf.data(), want.data(), count);
      if (!diff.empty()) {
        std::fprintf(stderr, "rank %d %s %s: %s\n", rank, dtype_name(t), reduce_op_name(op),
                     diff.c_str());
        return kWrongResult;
      }
    }
  }
  barrier(*c);
  // With single copy on for every message, shm ranks must really have read their peers.
  if (job.kind == TransportKind::kShm && job.single_copy_bytes == 1 &&
      c->single_copy_bytes_received() == 0) {
    std::fprintf(stderr, "rank %d: no single-copy read across processes\n", rank);
    return kWrongResult;
  }
  return kOk;
}

// Buffers in each process's shared arena, reduced in place across processes.
int shared_buffers_child(const Job& job, int rank) {
  auto c = Communicator::create(connect_store(job), rank, job.size, job_options(job));
  if (!c->has_shared_arena()) return kUnexpectedError;
  const size_t count = 300007;
  for (DType t : {DType::f32, DType::bf16}) {
    auto in = make_input(t, ReduceOp::sum, rank, count);
    SharedBuffer buf = c->alloc_shared(in.size());
    std::memcpy(buf.data(), in.data(), in.size());
    uint64_t before = c->message_bytes_received();
    allreduce(*c, {.output = buf.data(), .count = count, .dtype = t});
    auto want = reference(t, ReduceOp::sum, job.size, count);
    if (!compare(t, buf.data(), want.data(), count).empty() ||
        c->message_bytes_received() - before > 4096) {
      return kWrongResult;
    }
  }
  barrier(*c);
  return kOk;
}

// The last rank dies (SIGKILL: no destructor, no orderly close) after one allreduce; the
// others must get an IoError naming it from the next one, well within the deadline.
int killed_peer_child(const Job& job, int rank) {
  auto c = Communicator::create(connect_store(job), rank, job.size, job_options(job));
  std::vector<float> buf(4099, 1.0f);
  allreduce(*c, {.output = buf.data(), .count = buf.size()});
  int victim = job.size - 1;
  if (rank == victim) ::raise(SIGKILL);
  auto start = std::chrono::steady_clock::now();
  try {
    allreduce(*c, {.output = buf.data(), .count = buf.size(), .algorithm = Algorithm::kRing});
  } catch (const IoError& e) {
    std::string msg = e.what();
    auto took = std::chrono::steady_clock::now() - start;
    // The victim's neighbours see it die; the others see a neighbour give up ("closed").
    bool names_it = msg.find(detail::str("rank ", victim)) != std::string::npos ||
                    msg.find("closed") != std::string::npos;
    if (!names_it || took > milliseconds(2500)) {
      std::fprintf(stderr, "rank %d: unexpected error after %lld ms: %s\n", rank,
                   (long long)std::chrono::duration_cast<milliseconds>(took).count(), e.what());
      return kUnexpectedError;
    }
    return kOk;
  }
  return kNoError;
}

// Forks one process per rank running fn and returns their exit statuses.
std::vector<int> run_processes(const Job& job, int (*fn)(const Job&, int)) {
  return testing::fork_ranks(
      job.size, [&](int r) { return fn(job, r); }, kUnexpectedError, kChildTimeout);
}

class MultiProcess : public ::testing::TestWithParam<TransportKind> {
 protected:
  Job job(int size) {
    net::Secret secret = net::Secret::generate();
    store_.reset();
    store_ = std::make_unique<StoreProcess>(secret);
    return Job{size, GetParam(), secret, store_->port()};
  }
  std::unique_ptr<StoreProcess> store_;
};

TEST_P(MultiProcess, AllreduceAcrossProcesses) {
  for (int size : {2, 4}) {
    auto codes = run_processes(job(size), allreduce_child);
    for (int r = 0; r < size; ++r)
      EXPECT_EQ(codes[size_t(r)], kOk) << "size " << size << " rank " << r;
  }
}

TEST(MultiProcessShm, SharedArenaBuffersAcrossProcesses) {
  for (int size : {2, 3}) {
    net::Secret secret = net::Secret::generate();
    StoreProcess store(secret);
    Job j{size, TransportKind::kShm, secret, store.port()};
    auto codes = run_processes(j, shared_buffers_child);
    for (int r = 0; r < size; ++r)
      EXPECT_EQ(codes[size_t(r)], kOk) << "size " << size << " rank " << r;
  }
}

// Real processes read each other's memory (process_vm_readv) for every message.
TEST_P(MultiProcess, AllreduceAcrossProcessesSingleCopy) {
  for (int size : {2, 3}) {
    Job j = job(size);
    j.single_copy_bytes = 1;
    auto codes = run_processes(j, allreduce_child);
    for (int r = 0; r < size; ++r)
      EXPECT_EQ(codes[size_t(r)], kOk) << "size " << size << " rank " << r;
  }
}

TEST_P(MultiProcess, KilledRankBecomesIoErrorOnTheOthers) {
  auto codes = run_processes(job(3), killed_peer_child);
  EXPECT_EQ(codes[2], 128 + SIGKILL);
  EXPECT_EQ(codes[0], kOk);
  EXPECT_EQ(codes[1], kOk);
}

INSTANTIATE_TEST_SUITE_P(Kinds, MultiProcess,
                         ::testing::Values(TransportKind::kShm, TransportKind::kTcp),
                         [](const auto& info) {
                           return std::string(transport::transport_name(info.param));
                         });

}  // namespace
}  // namespace cohort::comm
