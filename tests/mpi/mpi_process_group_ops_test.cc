// comm::ProcessGroup over MPI: the operations strategies need beyond allreduce, through the
// same backend-independent checks as the native backend (tests/comm/pg_checks.h: references
// computed locally), plus MPI's own byte estimates, its receive-count check, and choosing the
// backend by name (comm::join_world). Named MpiBackend.ProcessGroup* so MpiLaunch runs them
// under 3 ranks and under 2.
#include <gtest/gtest.h>

#include "cohort/comm/backends/mpi/mpi_process_group.h"
#include "cohort/comm/init.h"
#include "mpi_test_util.h"
#include "tests/comm/pg_checks.h"

namespace cohort::comm::mpi_test {
namespace {

using namespace cohort::comm::testing;

// The job-wide MPI process group of these tests (collective to create; every rank runs the
// same tests in the same order). Destroyed before MPI_Finalize, like world().
ProcessGroup& pg() {
  static std::shared_ptr<ProcessGroup> g =
      make_mpi_process_group({.timeout = std::chrono::seconds(30)});
  return *g;
}

TEST_F(MpiBackend, ProcessGroupOpsReduceScatterAndAllgatherv) {
  check_reduce_scatter(pg(), false);
  check_reduce_scatter(pg(), true);
  check_allgatherv(pg(), false);
  check_allgatherv(pg(), true);
}

TEST_F(MpiBackend, ProcessGroupOpsAsyncBroadcastAndAllgather) {
  check_async_broadcast_allgather(pg());
}

TEST_F(MpiBackend, ProcessGroupOpsSendRecvAndBatchRing) {
  check_send_recv_ring(pg());
  check_batch_ring(pg());
}

TEST_F(MpiBackend, ProcessGroupOpsSubGroups) {
  check_split(pg());
  check_new_group(pg());
}

TEST_F(MpiBackend, ProcessGroupOpsErrors) {
  check_new_group_errors(pg());
  check_argument_errors(pg());
  // A message shorter than the receive: a CollectiveMismatch naming both counts.
  std::vector<int32_t> buf(7, 1);
  if (pg().rank() == 0) {
    pg().send({.buffer = buf.data(), .count = 5, .dtype = DType::i32, .peer = 1, .tag = 2});
  } else if (pg().rank() == 1) {
    std::string msg = error_of<CollectiveMismatch>([&] {
      pg().recv({.buffer = buf.data(), .count = 7, .dtype = DType::i32, .peer = 0, .tag = 2});
    });
    EXPECT_NE(msg.find("recv #"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 0 sent 5 elements with tag 2, this rank expected 7"),
              std::string::npos)
        << msg;
  }
  pg().barrier();  // a mismatch leaves the group usable
}

// Each call adds the documented ring estimate (mpi_process_group.h).
TEST_F(MpiBackend, ProcessGroupOpsCountEstimatedBytes) {
  ProcessGroup& g = pg();
  const uint64_t n = uint64_t(g.size());
  const int me = g.rank(), next = (me + 1) % g.size(), prev = (me + g.size() - 1) % g.size();
  uint64_t sent = g.bytes_sent(), received = g.bytes_received();
  std::vector<float> in(n * 10, 1.0f), out(n * 10);
  g.reduce_scatter({.input = in.data(), .output = out.data(), .count = 10});
  EXPECT_EQ(g.bytes_sent() - sent, (n - 1) * 40);
  EXPECT_EQ(g.bytes_received() - received, (n - 1) * 40);

  sent = g.bytes_sent(), received = g.bytes_received();
  auto counts = uneven_counts(g.size(), 4);  // rank 1 contributes nothing
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<float> all(total);
  g.allgatherv_async({.input = in.data(), .output = all.data(), .counts = counts}).wait();
  EXPECT_EQ(g.bytes_received() - received, (total - counts[size_t(me)]) * 4);
  EXPECT_EQ(g.bytes_sent() - sent, (total - counts[size_t(next)]) * 4);

  sent = g.bytes_sent(), received = g.bytes_received();
  g.batch_send_recv({{P2POp::kSend, in.data(), 3, DType::f32, next, 1},
                     {P2POp::kRecv, out.data(), 3, DType::f32, prev, 1}});
  EXPECT_EQ(g.bytes_sent() - sent, 12u);
  EXPECT_EQ(g.bytes_received() - received, 12u);
}

// comm.backend = "mpi" through the one factory: rank and size are MPI's.
TEST_F(MpiBackend, ProcessGroupOpsJoinWorldChoosesMpiByName) {
  auto have = available_backends();
  ASSERT_EQ(have, (std::vector<std::string>{"native", "mpi"}));
  auto w = join_world(rendezvous::snapshot_environment(),
                      {.backend = "mpi", .timeout = std::chrono::seconds(30)});
  EXPECT_STREQ(w->group->backend_name(), "mpi");
  EXPECT_EQ(w->rank, pg().rank());
  EXPECT_EQ(w->size, pg().size());
  EXPECT_EQ(w->comm, nullptr);
  int64_t v = w->rank;
  w->group->allreduce({.output = &v, .count = 1, .dtype = DType::i64, .op = ReduceOp::max});
  EXPECT_EQ(v, w->size - 1);
}

}  // namespace
}  // namespace cohort::comm::mpi_test
