// broadcast, reduce, allgather(v), reduce_scatter, gather, scatter, alltoall, barrier and
// send/recv against straightforward references, on several world sizes and both transports.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>

#include "tests/comm/collective_util.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;
using transport::TransportKind;

struct Param {
  int n;
  TransportKind kind;
  bool single_copy = false;  // every shm message read straight from the sender's memory
};

class Collectives : public ::testing::TestWithParam<Param> {
 protected:
  void run(const std::function<void(Communicator&)>& fn) {
    CommOptions o = test_options(GetParam().kind);
    if (GetParam().single_copy) o.device.shm_single_copy_bytes = 1;
    with_comms(GetParam().n, o, fn);
  }
  int n() const { return GetParam().n; }
};

// Element i of rank r's contribution in data-movement tests: unique per (rank, i).
double tagged(int r, size_t i) {
  return double(r * 1000 + int(i % 997));
}

std::vector<char> tagged_buffer(DType t, int r, size_t count) {
  std::vector<char> b(count * dtype_size(t) + 1);
  for (size_t i = 0; i < count; ++i) put(t, b.data(), i, tagged(r, i));
  return b;
}

TEST_P(Collectives, BroadcastFromEveryRootBothAlgorithms) {
  run([&](Communicator& c) {
    for (Algorithm algo : {Algorithm::kTree, Algorithm::kRing, Algorithm::kAuto}) {
      for (int root = 0; root < n(); ++root) {
        for (size_t count : {size_t(0), size_t(1), size_t(1009), size_t(3000)}) {
          auto want = tagged_buffer(DType::i32, root, count);
          auto buf = c.rank() == root ? want : std::vector<char>(want.size(), 0);
          broadcast(c, {.buffer = buf.data(),
                        .count = count,
                        .dtype = DType::i32,
                        .root = root,
                        .algorithm = algo});
          ASSERT_EQ(compare(DType::i32, buf.data(), want.data(), count), "")
              << algorithm_name(algo) << " root " << root << " count " << count;
        }
      }
    }
  });
}

TEST_P(Collectives, ReduceToEveryRootEveryOp) {
  run([&](Communicator& c) {
    for (Algorithm algo : {Algorithm::kTree, Algorithm::kRing}) {
      for (DType t : {DType::f32, DType::f16, DType::i64, DType::u8}) {
        for (ReduceOp op : kAllOps) {
          for (int root = 0; root < n(); ++root) {
            size_t count = 1009;
            auto in = make_input(t, op, c.rank(), count);
            std::vector<char> out(in.size(), 0);
            reduce(c, {.input = in.data(),
                       .output = out.data(),
                       .count = count,
                       .dtype = t,
                       .op = op,
                       .root = root,
                       .algorithm = algo});
            if (c.rank() != root) continue;
            auto want = reference(t, op, n(), count);
            ASSERT_EQ(compare(t, out.data(), want.data(), count), "")
                << algorithm_name(algo) << " " << dtype_name(t) << " " << reduce_op_name(op)
                << " root " << root;
          }
        }
      }
    }
  });
}

TEST_P(Collectives, AllgatherInPlaceAndOutOfPlace) {
  run([&](Communicator& c) {
    for (size_t count : {size_t(0), size_t(1), size_t(1009)}) {
      for (bool in_place : {false, true}) {
        auto mine = tagged_buffer(DType::f64, c.rank(), count);
        std::vector<char> out(size_t(n()) * count * 8 + 1, 0);
        if (in_place)
          std::memcpy(out.data() + size_t(c.rank()) * count * 8, mine.data(), count * 8);
        allgather(c, {.input = in_place ? nullptr : mine.data(),
                      .output = out.data(),
                      .count = count,
                      .dtype = DType::f64});
        for (int k = 0; k < n(); ++k) {
          auto want = tagged_buffer(DType::f64, k, count);
          ASSERT_EQ(compare(DType::f64, out.data() + size_t(k) * count * 8, want.data(), count), "")
              << "block " << k << " count " << count;
        }
      }
    }
  });
}

TEST_P(Collectives, AllgathervWithUnevenAndEmptyBlocks) {
  run([&](Communicator& c) {
    std::vector<size_t> counts;
    for (int k = 0; k < n(); ++k) counts.push_back(size_t(k % 3 == 1 ? 0 : 37 * k + 5));
    size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
    auto mine = tagged_buffer(DType::bf16, c.rank(), counts[size_t(c.rank())]);
    std::vector<char> out(total * 2 + 1, 0);
    allgatherv(
        c, {.input = mine.data(), .output = out.data(), .counts = counts, .dtype = DType::bf16});
    size_t off = 0;
    for (int k = 0; k < n(); ++k) {
      // bf16 holds integers exactly only up to 256: compare against the same rounding.
      auto want = tagged_buffer(DType::bf16, k, counts[size_t(k)]);
      ASSERT_EQ(compare(DType::bf16, out.data() + off * 2, want.data(), counts[size_t(k)]), "")
          << "block " << k;
      off += counts[size_t(k)];
    }
  });
}

TEST_P(Collectives, ReduceScatterEveryOp) {
  run([&](Communicator& c) {
    for (DType t : {DType::f32, DType::i32, DType::bf16}) {
      for (ReduceOp op : kAllOps) {
        for (size_t count : {size_t(0), size_t(1), size_t(333)}) {
          size_t total = count * size_t(n());
          auto in = make_input(t, op, c.rank(), total);
          std::vector<char> out(count * dtype_size(t) + 1, 0);
          reduce_scatter(
              c, {.input = in.data(), .output = out.data(), .count = count, .dtype = t, .op = op});
          auto want = reference(t, op, n(), count, size_t(c.rank()) * count);
          ASSERT_EQ(compare(t, out.data(), want.data(), count), "")
              << dtype_name(t) << " " << reduce_op_name(op) << " count " << count;
        }
      }
    }
  });
}

TEST_P(Collectives, GatherAndScatterFromEveryRoot) {
  run([&](Communicator& c) {
    const size_t count = 101;
    for (int root = 0; root < n(); ++root) {
      auto mine = tagged_buffer(DType::i32, c.rank(), count);
      std::vector<char> all(size_t(n()) * count * 4 + 1, 0);
      gather(c, {.input = mine.data(),
                 .output = all.data(),
                 .count = count,
                 .dtype = DType::i32,
                 .root = root});
      if (c.rank() == root) {
        for (int k = 0; k < n(); ++k) {
          auto want = tagged_buffer(DType::i32, k, count);
          ASSERT_EQ(compare(DType::i32, all.data() + size_t(k) * count * 4, want.data(), count), "")
              << "gather root " << root << " block " << k;
        }
      }
      // Scatter it back out: rank k gets block k.
      std::vector<char> back(count * 4 + 1, 0);
      scatter(c, {.input = all.data(),
                  .output = back.data(),
                  .count = count,
                  .dtype = DType::i32,
                  .root = root});
      ASSERT_EQ(compare(DType::i32, back.data(), mine.data(), count), "")
          << "scatter root " << root;
    }
  });
}

TEST_P(Collectives, AlltoallTransposesBlocks) {
  run([&](Communicator& c) {
    const size_t count = 53;
    std::vector<char> in(size_t(n()) * count * 4), out(in.size(), 0);
    // Block k of rank r holds r * 100 + k.
    for (int k = 0; k < n(); ++k) {
      for (size_t i = 0; i < count; ++i)
        put(DType::i32, in.data(), size_t(k) * count + i, c.rank() * 100 + k);
    }
    alltoall(c, {.input = in.data(), .output = out.data(), .count = count, .dtype = DType::i32});
    for (int k = 0; k < n(); ++k) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(get(DType::i32, out.data(), size_t(k) * count + i), k * 100 + c.rank())
            << "block from rank " << k;
      }
    }
  });
}

TEST_P(Collectives, SendRecvAroundTheRing) {
  run([&](Communicator& c) {
    if (n() == 1) return;
    int right = (c.rank() + 1) % n(), left = (c.rank() + n() - 1) % n();
    for (size_t count : {size_t(0), size_t(7), size_t(5000)}) {
      auto mine = tagged_buffer(DType::i64, c.rank(), count);
      std::vector<char> got(mine.size(), 0);
      // Even ranks send first, odd ranks receive first: no rank waits on itself.
      auto do_send = [&] {
        send(c,
             {.buffer = mine.data(), .count = count, .dtype = DType::i64, .peer = right, .tag = 7});
      };
      auto do_recv = [&] {
        recv(c,
             {.buffer = got.data(), .count = count, .dtype = DType::i64, .peer = left, .tag = 7});
      };
      if (c.rank() % 2 == 0) {
        auto w = send_async(
            c,
            {.buffer = mine.data(), .count = count, .dtype = DType::i64, .peer = right, .tag = 7});
        do_recv();
        w.wait();
      } else {
        do_recv();
        do_send();
      }
      auto want = tagged_buffer(DType::i64, left, count);
      ASSERT_EQ(compare(DType::i64, got.data(), want.data(), count), "") << "count " << count;
    }
  });
}

// Both neighbours at once, messages far larger than the transports buffer: only a batch
// (everything posted together) can complete this.
TEST_P(Collectives, BatchSendRecvExchangesLargeMessagesWithBothNeighbours) {
  CommOptions o = test_options(GetParam().kind);
  o.device.tcp_socket_buffer = 64 << 10;
  with_comms(n(), o, [&](Communicator& c) {
    if (n() == 1) return;
    int right = (c.rank() + 1) % n(), left = (c.rank() + n() - 1) % n();
    const size_t count = 300000;  // 1.2 MB of f32 each way, per neighbour
    auto mine = tagged_buffer(DType::f32, c.rank(), count);
    std::vector<char> from_left(mine.size()), from_right(mine.size());
    std::vector<P2POp> ops = {
        {P2POp::kSend, mine.data(), count, DType::f32, right, 1},
        {P2POp::kSend, mine.data(), count, DType::f32, left, 2},
        {P2POp::kRecv, from_left.data(), count, DType::f32, left, 1},
        {P2POp::kRecv, from_right.data(), count, DType::f32, right, 2},
    };
    if (n() == 2) ops = {ops[0], ops[2]};  // left == right: one exchange
    batch_send_recv(c, ops);
    auto want_left = tagged_buffer(DType::f32, left, count);
    ASSERT_EQ(compare(DType::f32, from_left.data(), want_left.data(), count), "");
    if (n() > 2) {
      auto want_right = tagged_buffer(DType::f32, right, count);
      ASSERT_EQ(compare(DType::f32, from_right.data(), want_right.data(), count), "");
    }
  });
}

TEST_P(Collectives, BarrierHoldsEveryoneUntilTheLastArrives) {
  std::atomic<int> arrived{0};
  run([&](Communicator& c) {
    if (c.rank() == n() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    arrived.fetch_add(1);
    barrier(c);
    EXPECT_EQ(arrived.load(), n()) << "rank " << c.rank() << " left the barrier early";
  });
}

TEST_P(Collectives, AsyncOperationsCompleteInIssueOrder) {
  run([&](Communicator& c) {
    const size_t count = 1009;
    std::vector<std::vector<char>> bufs;
    std::vector<Work> works;
    for (int k = 0; k < 4; ++k)
      bufs.push_back(make_input(DType::f32, ReduceOp::sum, c.rank() + k, count));
    for (int k = 0; k < 4; ++k) {
      works.push_back(allreduce_async(c, {.output = bufs[size_t(k)].data(), .count = count}));
    }
    float x = float(c.rank());
    allreduce(c, {.output = &x, .count = 1});  // synchronous: runs after the four above
    for (int k = 0; k < 4; ++k) {
      EXPECT_TRUE(works[size_t(k)].done()) << "async #" << k << " not done before a later sync op";
      works[size_t(k)].wait();
    }
    EXPECT_EQ(x, float(n() * (n() - 1) / 2));
    for (int k = 0; k < 4; ++k) {
      // value(r + k) summed over r: reference with shifted ranks.
      std::vector<char> want(count * 4 + 1);
      for (size_t i = 0; i < count; ++i) {
        double s = 0;
        for (int r = 0; r < n(); ++r) s += value(DType::f32, ReduceOp::sum, r + k, i);
        put(DType::f32, want.data(), i, s);
      }
      EXPECT_EQ(compare(DType::f32, bufs[size_t(k)].data(), want.data(), count), "") << k;
    }
  });
}

// issue_inline: a collective issued through it while nothing is in flight is done when the
// call returns (it ran on the caller); one issued behind an operation still in flight waits its
// turn; other collectives never run on the caller, not even a barrier.
TEST_P(Collectives, IssueInlineRunsOnTheCallerOnlyWhenNothingIsInFlight) {
  if (n() == 1) return;
  constexpr auto kLate = std::chrono::milliseconds(300);
  run([&](Communicator& c) {
    const bool last = c.rank() == n() - 1;
    if (last) std::this_thread::sleep_for(kLate);
    Work early = barrier_async(c, {});  // not through issue_inline: queued
    if (!last) EXPECT_FALSE(early.done()) << "rank " << c.rank() << ": ran on the caller";
    early.wait();
    // The worker releases the communicator just after it completes a Work: a synchronous
    // operation waits for that, so nothing is in flight below.
    barrier(c);

    float x = float(c.rank() + 1);
    Work here = c.issue_inline([&] { return allreduce_async(c, {.output = &x, .count = 1}); });
    EXPECT_TRUE(here.done()) << "rank " << c.rank() << ": did not run on the caller";
    EXPECT_EQ(x, float(n() * (n() + 1) / 2));

    if (last) std::this_thread::sleep_for(kLate);
    std::vector<float> big(1024, float(c.rank()));
    float y = 1.0f;
    Work first = allreduce_async(c, {.output = big.data(), .count = big.size()});
    Work behind = c.issue_inline([&] { return allreduce_async(c, {.output = &y, .count = 1}); });
    if (!last) EXPECT_FALSE(behind.done()) << "rank " << c.rank() << ": overtook the queue";
    behind.wait();
    EXPECT_TRUE(first.done());
    EXPECT_EQ(y, float(n()));
    EXPECT_EQ(big[1023], float(n() * (n() - 1) / 2));
  });
}

INSTANTIATE_TEST_SUITE_P(
    Worlds, Collectives,
    ::testing::Values(Param{1, TransportKind::kShm}, Param{2, TransportKind::kShm},
                      Param{3, TransportKind::kShm}, Param{5, TransportKind::kShm},
                      Param{8, TransportKind::kShm}, Param{2, TransportKind::kTcp},
                      Param{3, TransportKind::kTcp}, Param{4, TransportKind::kTcp},
                      Param{2, TransportKind::kShm, true}, Param{5, TransportKind::kShm, true}),
    [](const auto& info) {
      return detail::str(transport::transport_name(info.param.kind),
                         info.param.single_copy ? "SingleCopy" : "", info.param.n);
    });

}  // namespace
}  // namespace cohort::comm
