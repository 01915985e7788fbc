// Asynchronous operations, sub-groups, and the errors of the MPI backend: bad arguments are
// InvalidArgument before anything is posted; a peer that never sends is a Timeout at the
// deadline; an error from MPI is an IoError naming the op and the rank; after either the
// communicator refuses further operations.
#include <gtest/gtest.h>

#include <climits>
#include <numeric>

#include "cohort/core/error.h"
#include "mpi_test_util.h"

namespace cohort::comm::mpi_test {
namespace {

using std::chrono::milliseconds;

TEST_F(MpiBackend, AsyncOperationsRunInIssueOrderAndWaitRethrowsNothingOnSuccess) {
  MpiCommunicator& c = world();
  const int p = c.size();
  std::vector<float> a(1000, float(c.rank())), b(7, 1.0f);
  std::vector<int64_t> root_value(3, c.rank() == 0 ? 42 : 0);
  Work w1 = allreduce_async(c, {.output = a.data(), .count = a.size(), .op = ReduceOp::avg});
  Work w2 = broadcast_async(c, {.buffer = root_value.data(), .count = 3, .dtype = DType::i64});
  Work w3 = allreduce_async(c, {.output = b.data(), .count = b.size()});
  Work w4 = barrier_async(c);
  w4.wait(milliseconds(20000));
  EXPECT_TRUE(w1.done() && w2.done() && w3.done());
  w1.wait();
  w2.wait();
  w3.wait();
  EXPECT_EQ(w1.name().rfind("allreduce #", 0), 0u) << w1.name();
  float avg = float(p - 1) / 2.0f;
  for (float v : a) ASSERT_EQ(v, avg);
  for (int64_t v : root_value) ASSERT_EQ(v, 42);
  for (float v : b) ASSERT_EQ(v, float(p));
  // A synchronous call after async ones sees their results (it waits for them first).
  std::vector<int32_t> x(5, 1);
  Work w5 = allreduce_async(c, {.output = x.data(), .count = 5, .dtype = DType::i32});
  allreduce(c, {.output = x.data(), .count = 5, .dtype = DType::i32});
  EXPECT_TRUE(w5.done());
  for (int32_t v : x) EXPECT_EQ(v, p * p);
}

TEST_F(MpiBackend, SplitAndNewGroupReduceWithinTheirRanks) {
  MpiCommunicator& c = world();
  auto half = c.split(c.rank() % 2, c.rank());
  ASSERT_NE(half, nullptr);
  int32_t mine = c.rank(), sum = 0;
  allreduce(*half, {.input = &mine, .output = &sum, .count = 1, .dtype = DType::i32});
  int32_t want = 0;
  for (int r = c.rank() % 2; r < c.size(); r += 2) want += r;
  EXPECT_EQ(sum, want);

  auto group = c.new_group({2, 0});  // rank 2 is rank 0 of the group
  if (c.rank() == 1) {
    EXPECT_EQ(group, nullptr);
  } else {
    ASSERT_NE(group, nullptr);
    EXPECT_EQ(group->size(), 2);
    EXPECT_EQ(group->rank(), c.rank() == 2 ? 0 : 1);
    int32_t v = c.rank() == 2 ? 77 : 0;
    broadcast(*group, {.buffer = &v, .count = 1, .dtype = DType::i32, .root = 0});
    EXPECT_EQ(v, 77);
  }
  EXPECT_THROW(c.new_group({0, 0}), InvalidArgument);
}

template <typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

TEST_F(MpiBackend, BadArgumentsAreInvalidArgumentNamingTheOpAndValue) {
  MpiCommunicator& c = world();
  float x = 0;
  EXPECT_THROW(allreduce(c, {.output = &x, .count = 1, .algorithm = Algorithm::kRing}),
               InvalidArgument);
  EXPECT_NE(message_of([&] {
              allreduce(c, {.output = &x, .count = 1, .algorithm = Algorithm::kRing});
            }).find("allreduce: algorithm ring is not available on the MPI backend"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              broadcast(c, {.buffer = &x, .count = 1, .root = 3});
            }).find("broadcast on rank " + std::to_string(c.rank()) + ": root 3 is not in [0, 3)"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              allreduce(c, {.output = nullptr, .count = 4});
            }).find("output is null with count 4"),
            std::string::npos);
  size_t huge = size_t(INT_MAX) + 1;  // refused before the buffer is touched
  EXPECT_NE(message_of([&] {
              allreduce(c, {.output = &x, .count = huge});
            }).find("does not fit in an MPI count"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              send(c, {.buffer = &x, .count = 1, .peer = 5});
            }).find("send on rank " + std::to_string(c.rank()) + ": peer 5 is not in [0, 3)"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              send(c, {.buffer = &x, .count = 1, .peer = 0, .tag = 1u << 31});
            }).find("exceeds MPI_TAG_UB"),
            std::string::npos);
  // None of that broke the communicator.
  allreduce(c, {.output = &x, .count = 1});
  barrier(c);
}

TEST_F(MpiBackend, APeerThatNeverSendsIsATimeoutAndTheCommunicatorThenRefusesWork) {
  auto c = MpiCommunicator::create({.timeout = std::chrono::seconds(30)});
  if (c->rank() == 0) {
    int32_t v = 0;
    auto t0 = std::chrono::steady_clock::now();
    std::string msg = message_of([&] {
      recv(*c, {.buffer = &v,
                .count = 1,
                .dtype = DType::i32,
                .peer = 1,
                .tag = 3,
                .timeout = milliseconds(200)});
    });
    auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_NE(msg.find("recv #0 on rank 0 (mpi, recv(count=1, i32, from rank 1, tag 3)) timed out"),
              std::string::npos)
        << msg;
    EXPECT_GE(waited, milliseconds(200));
    EXPECT_LT(waited, milliseconds(5000));
    EXPECT_THROW(recv(*c, {.buffer = &v, .count = 1, .dtype = DType::i32, .peer = 1}), IoError);
    EXPECT_NE(message_of([&] { barrier(*c); }).find("unusable after an earlier error"),
              std::string::npos);
  }
  barrier(world());
}

TEST_F(MpiBackend, AnErrorFromMpiIsAnIoErrorNamingTheOpAndRank) {
  auto c = MpiCommunicator::create({.timeout = std::chrono::seconds(30)});
  std::vector<int32_t> ten(10, 7);
  if (c->rank() == 1) {
    send(*c, {.buffer = ten.data(), .count = 10, .dtype = DType::i32, .peer = 0, .tag = 4});
  } else if (c->rank() == 0) {
    // Five slots for a ten-element message: MPI_ERR_TRUNCATE.
    std::string msg = message_of([&] {
      recv(*c, {.buffer = ten.data(), .count = 5, .dtype = DType::i32, .peer = 1, .tag = 4});
    });
    EXPECT_NE(msg.find("recv #0 on rank 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    EXPECT_THROW(barrier(*c), IoError);
  }
  barrier(world());
}

}  // namespace
}  // namespace cohort::comm::mpi_test
