// comm::ProcessGroup over the native backend, ranks as threads: the operations strategies
// need beyond allreduce (reduce_scatter, allgatherv, async broadcast and allgather, send/recv,
// batch_send_recv, sub-groups), for every dtype, odd sizes and 1-4 ranks (pg_checks.h; the
// same checks run over MPI in tests/mpi), and the errors the native backend adds.
#include <gtest/gtest.h>

#include <atomic>

#include "cohort/comm/init.h"
#include "tests/comm/pg_checks.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;

TEST(ProcessGroupNative, ReduceScatterEveryDtypeOpAndSize) {
  for (int n = 1; n <= 4; ++n) {
    with_groups(n, [](ProcessGroup& pg) {
      check_reduce_scatter(pg, false);
      check_reduce_scatter(pg, true);
    });
  }
}

TEST(ProcessGroupNative, AllgathervUnevenCountsEveryDtype) {
  for (int n = 1; n <= 4; ++n) {
    with_groups(n, [](ProcessGroup& pg) {
      check_allgatherv(pg, false);
      check_allgatherv(pg, true);
    });
  }
}

TEST(ProcessGroupNative, AsyncBroadcastAndAllgatherEveryDtype) {
  for (int n = 1; n <= 4; ++n) with_groups(n, check_async_broadcast_allgather);
}

TEST(ProcessGroupNative, SendRecvAroundARingEveryDtype) {
  for (int n = 2; n <= 4; ++n) with_groups(n, check_send_recv_ring);
}

TEST(ProcessGroupNative, BatchSendRecvRingWhereEveryRankSendsFirst) {
  for (int n = 2; n <= 4; ++n) with_groups(n, check_batch_ring);
  with_groups(3, check_batch_ring, transport::TransportKind::kTcp);
}

TEST(ProcessGroupNative, SplitByParityThenSplitOfTheSplit) {
  for (int n = 1; n <= 4; ++n) with_groups(n, check_split);
}

TEST(ProcessGroupNative, NewGroupOfASubsetInTheListedOrder) {
  for (int n = 1; n <= 4; ++n) with_groups(n, check_new_group);
}

TEST(ProcessGroupNative, NewGroupListsThatDifferOrRepeatFailOnEveryRank) {
  for (int n = 2; n <= 3; ++n) with_groups(n, check_new_group_errors);
}

TEST(ProcessGroupNative, ArgumentErrorsAreRefusedBeforeSending) {
  for (int n = 2; n <= 3; ++n) with_groups(n, check_argument_errors);
}

// Ranks that disagree on a count: a CollectiveMismatch naming both sides on at least one rank;
// the others fail too (their peer aborted), none hangs.
TEST(ProcessGroupNative, CountMismatchesNameBothSides) {
  std::atomic<int> mismatches{0};
  with_groups(2, [&](ProcessGroup& pg) {
    std::vector<int32_t> buf(7, 1);
    try {
      if (pg.rank() == 0) {
        pg.send({.buffer = buf.data(), .count = 5, .dtype = DType::i32, .peer = 1, .tag = 2});
        pg.barrier();  // fails: rank 1 gave up
      } else {
        pg.recv({.buffer = buf.data(), .count = 7, .dtype = DType::i32, .peer = 0, .tag = 2});
      }
      ADD_FAILURE() << "rank " << pg.rank() << " did not fail";
    } catch (const CollectiveMismatch& e) {
      ++mismatches;
      EXPECT_NE(std::string(e.what()).find("count=7"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("count=5"), std::string::npos) << e.what();
    } catch (const Error&) {
    }
  });
  EXPECT_GE(mismatches.load(), 1);
  mismatches = 0;
  with_groups(3, [&](ProcessGroup& pg) {
    size_t count = pg.rank() == 2 ? 4 : 3;
    std::vector<float> in(12), out(4);
    try {
      pg.reduce_scatter({.input = in.data(), .output = out.data(), .count = count});
      ADD_FAILURE() << "rank " << pg.rank() << " did not fail";
    } catch (const CollectiveMismatch& e) {
      ++mismatches;
      EXPECT_NE(std::string(e.what()).find("reduce_scatter"), std::string::npos) << e.what();
    } catch (const Error&) {
    }
  });
  EXPECT_GE(mismatches.load(), 1);
}

TEST(ProcessGroupBackends, UnknownOrMissingBackendsNameWhatThisBuildHas) {
  auto have = available_backends();
  ASSERT_FALSE(have.empty());
  EXPECT_EQ(have[0], "native");
  std::string msg = error_of<InvalidArgument>([] { join_world({}, {.backend = "nccl"}); });
  EXPECT_NE(msg.find("comm backend \"nccl\" is unknown; this build has: native"), std::string::npos)
      << msg;
  if (have.size() == 1) {
    msg = error_of<InvalidArgument>([] { join_world({}, {.backend = "mpi"}); });
    EXPECT_NE(msg.find("built without MPI"), std::string::npos) << msg;
  } else {
    EXPECT_EQ(have[1], "mpi");
  }
  auto w = join_world({}, {.backend = "native"});
  EXPECT_STREQ(w->group->backend_name(), "native");
  EXPECT_NE(w->comm, nullptr);
}

}  // namespace
}  // namespace cohort::comm
