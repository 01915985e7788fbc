// Allreduce over buffers in the ranks' shared arenas (Communicator::alloc_shared,
// Algorithm::kSharedBuffers): exact against the reference for every dtype, op, awkward size and
// world size, in and out of place; bit-identical across ranks; the arena's allocator and
// lifetime; and the errors a user can run into.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "cohort/comm/transport/shm/shm_arena.h"
#include "cohort/rendezvous/hash_store.h"
#include "tests/comm/collective_util.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;
using transport::TransportKind;

CommOptions arena_options() {
  CommOptions o = test_options(TransportKind::kShm);
  o.device.shm_arena_bytes = size_t{64} << 20;
  o.shared_buffers_min_bytes = 1;  // every size takes the shared-buffer path
  return o;
}

SharedBuffer copy_to_arena(Communicator& c, const std::vector<char>& v) {
  SharedBuffer b = c.alloc_shared(std::max<size_t>(v.size(), 1));
  EXPECT_TRUE(b) << "no shared arena on rank " << c.rank();
  std::memcpy(b.data(), v.data(), v.size());
  return b;
}

void check_every_dtype_and_op(int n, const std::vector<size_t>& counts) {
  with_comms(n, arena_options(), [&](Communicator& c) {
    for (DType t : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        for (size_t count : counts) {
          auto in = make_input(t, op, c.rank(), count);
          bool in_place = count % 2 == 1;
          SharedBuffer src = copy_to_arena(c, in);
          SharedBuffer dst = in_place ? SharedBuffer() : c.alloc_shared(in.size() + 1);
          void* out = in_place ? src.data() : dst.data();
          // Peers write their segments straight into this output: never past its end.
          if (!in_place) static_cast<char*>(dst.data())[in.size()] = 0x5a;
          allreduce(c, {.input = in_place ? nullptr : src.data(),
                        .output = out,
                        .count = count,
                        .dtype = t,
                        .op = op,
                        .algorithm = count > 0 ? Algorithm::kSharedBuffers : Algorithm::kAuto});
          auto want = reference(t, op, n, count);
          std::string diff = compare(t, out, want.data(), count);
          ASSERT_EQ(diff, "") << "n=" << n << " rank " << c.rank() << " " << dtype_name(t) << " "
                              << reduce_op_name(op) << " count " << count;
          // The input of an out-of-place call is left alone.
          if (!in_place) {
            ASSERT_EQ(std::memcmp(src.data(), in.data(), in.size()), 0);
            ASSERT_EQ(static_cast<char*>(dst.data())[in.size()], 0x5a);
          }
        }
      }
    }
  });
}

TEST(SharedBuffers, EveryDtypeAndOpOnTwoRanks) {
  check_every_dtype_and_op(2, {1, 2, 1009, 70001});
}

TEST(SharedBuffers, EveryDtypeAndOpOnThreeAndFiveRanks) {
  check_every_dtype_and_op(3, {1, 2, 1009, 40003});  // 40003: several staging pieces
  check_every_dtype_and_op(5, {1, 4, 1009});
}

TEST(SharedBuffers, AutoPicksItForArenaBuffersOnlyAndResultsAreBitIdenticalAcrossRanks) {
  const int n = 4;
  const size_t count = 100003;
  std::vector<std::vector<float>> results(n);
  CommOptions o = arena_options();
  o.shared_buffers_min_bytes = 4096;
  with_comms(n, o, [&](Communicator& c) {
    SharedBuffer b = c.alloc_shared(count * 4);
    auto* x = b.as<float>();
    for (size_t i = 0; i < count; ++i) x[i] = 0.1f * float(i % 13) + 0.37f * float(c.rank());
    EXPECT_TRUE(c.in_shared_arena(x, count * 4));
    std::vector<float> heap(x, x + count);
    EXPECT_FALSE(c.in_shared_arena(heap.data(), 4));
    uint64_t before = c.message_bytes_received();
    allreduce(c, {.output = x, .count = count, .op = ReduceOp::avg});
    // In place through the arenas: only the offsets and two barriers travel.
    EXPECT_LT(c.message_bytes_received() - before, 1024u);
    allreduce(c, {.output = heap.data(), .count = count, .op = ReduceOp::avg});  // the rings
    EXPECT_GT(c.message_bytes_received() - before, count * 4);
    results[size_t(c.rank())].assign(x, x + count);
    // Same values as the rings up to rounding (another summation order).
    for (size_t i = 0; i < count; i += 997) EXPECT_NEAR(x[i], heap[i], 1e-5) << i;
  });
  for (int r = 1; r < n; ++r) EXPECT_EQ(results[size_t(r)], results[0]) << "rank " << r;
}

// Peers write their results straight into this rank's buffer: a rank whose call failed (here a
// timeout) has its buffer back, and a peer that arrives later must not write into it. The late
// peer fails instead, naming the rank that left.
TEST(SharedBuffers, ALatePeerNeverWritesIntoTheBufferOfARankThatGaveUp) {
  constexpr size_t kCount = 65536;
  std::atomic<bool> given_up{false};
  with_comms(2, arena_options(), [&](Communicator& c) {
    SharedBuffer buf = c.alloc_shared(kCount * sizeof(float));
    ASSERT_TRUE(buf);
    auto* x = static_cast<float*>(buf.data());
    std::fill(x, x + kCount, float(c.rank() + 1));
    AllreduceOptions o{.output = x, .count = kCount};
    o.algorithm = Algorithm::kSharedBuffers;
    o.timeout = std::chrono::milliseconds(300);
    if (c.rank() == 1) {
      EXPECT_THROW(allreduce(c, o), Timeout);
      std::fill(x, x + kCount, 7.0f);  // the user's again
      given_up = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 0 tries meanwhile
      EXPECT_EQ(std::count(x, x + kCount, 7.0f), ptrdiff_t(kCount));
      return;
    }
    while (!given_up) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    o.timeout = std::chrono::seconds(5);
    std::string msg = error_of<IoError>([&] { allreduce(c, o); });
    EXPECT_NE(msg.find("rank 1 left the call"), std::string::npos) << msg;
  });
}

TEST(SharedBuffers, NoArenaOverTcpAndAnExplicitRequestIsAClearError) {
  with_comms(2, test_options(TransportKind::kTcp), [&](Communicator& c) {
    EXPECT_FALSE(c.has_shared_arena());
    EXPECT_FALSE(c.alloc_shared(1024));
    std::vector<float> x(100, 1.0f);
    std::string msg;
    try {
      allreduce(c, {.output = x.data(), .count = 100, .algorithm = Algorithm::kSharedBuffers});
    } catch (const InvalidArgument& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("shared arena"), std::string::npos) << msg;
    allreduce(c, {.output = x.data(), .count = 100});  // still usable
    EXPECT_EQ(x[0], 2.0f);
  });
}

// The rank that sees the other's first message reports a CollectiveMismatch naming both calls;
// the other fails too (mismatch or the broken pair), so nobody hangs.
TEST(SharedBuffers, ARankWithoutArenaBuffersIsAMismatchNamingBothAlgorithms) {
  CommOptions o = arena_options();
  o.timeout = std::chrono::seconds(5);
  std::string msgs[2];
  with_comms(2, o, [&](Communicator& c) {
    SharedBuffer b = c.alloc_shared(4096);
    std::vector<char> heap(4096);
    void* buf = c.rank() == 0 ? b.data() : heap.data();
    try {
      allreduce(c, {.output = buf, .count = 1024});
      msgs[c.rank()] = "no error";
    } catch (const CollectiveMismatch& e) {
      msgs[c.rank()] = e.what();
    } catch (const IoError& e) {
      msgs[c.rank()] = e.what();
    }
  });
  for (const auto& m : msgs) EXPECT_NE(m, "no error");
  bool named = false;
  for (const auto& m : msgs) {
    named |=
        m.find("shared_buffers") != std::string::npos && m.find("mismatch") != std::string::npos;
  }
  EXPECT_TRUE(named) << msgs[0] << " | " << msgs[1];
}

// Arenas only work if every rank has one: a rank configured without (size 0) turns them off
// on all ranks instead of leaving some ranks to pick the in-place algorithm alone.
TEST(SharedBuffers, ARankWithoutAnArenaTurnsThemOffEverywhere) {
  auto store = std::make_shared<rendezvous::HashStore>();
  run_ranks(3, [&](int r) {
    CommOptions o = arena_options();
    if (r == 1) o.device.shm_arena_bytes = 0;
    auto c = Communicator::create(store, r, 3, o);
    EXPECT_FALSE(c->has_shared_arena()) << "rank " << r;
    EXPECT_FALSE(c->alloc_shared(4096));
    std::vector<float> x(1000, 1.0f);
    allreduce(*c, {.output = x.data(), .count = x.size()});
    EXPECT_EQ(x[999], 3.0f);
  });
}

// Ranks may configure different arena sizes: each maps its peers' arenas at their real size.
TEST(SharedBuffers, RanksWithDifferentArenaSizesStillReduceInPlace) {
  auto store = std::make_shared<rendezvous::HashStore>();
  run_ranks(2, [&](int r) {
    CommOptions o = arena_options();
    o.device.shm_arena_bytes = r == 0 ? size_t{1} << 20 : size_t{8} << 20;
    auto c = Communicator::create(store, r, 2, o);
    const size_t count = 200000;  // 800 KB: near the end of rank 0's 1 MiB arena
    SharedBuffer b = c->alloc_shared(count * 4);
    for (size_t i = 0; i < count; ++i) b.as<float>()[i] = float(r + 1);
    allreduce(*c, {.output = b.data(), .count = count});
    EXPECT_EQ(b.as<float>()[count - 1], 3.0f);
  });
}

// A world of one has no peers and so no arena: asking for the algorithm is a clear error, and
// the default path still copies input to output.
TEST(SharedBuffers, AWorldOfOneHasNoArenaAndSaysSo) {
  with_comms(1, arena_options(), [&](Communicator& c) {
    EXPECT_FALSE(c.has_shared_arena());
    std::vector<float> in(100, 2.0f), out(100, 0.0f);
    EXPECT_THROW(allreduce(c, {.input = in.data(),
                               .output = out.data(),
                               .count = 100,
                               .algorithm = Algorithm::kSharedBuffers}),
                 InvalidArgument);
    allreduce(c, {.input = in.data(), .output = out.data(), .count = 100});
    EXPECT_EQ(out[99], 2.0f);
  });
}

TEST(ShmArena, AllocatesAlignedReusesFreedSpaceAndSaysWhenFull) {
  std::string name;
  auto arena = transport::ShmArena::create(size_t{1} << 20, 0, &name);
  void* a = arena->allocate(100);
  void* b = arena->allocate(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  EXPECT_EQ(arena->bytes_in_use(), 128u + 1024u);
  arena->release(a);
  EXPECT_EQ(arena->allocate(64), a);  // first fit reuses the hole
  arena->release(a);
  arena->release(b);
  EXPECT_EQ(arena->bytes_in_use(), 0u);
  void* all = arena->allocate(size_t{1} << 20);  // holes merged back into one
  EXPECT_EQ(all, a);
  try {
    arena->allocate(64);
    ADD_FAILURE() << "a full arena allocated";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("is full"), std::string::npos) << e.what();
  }
  EXPECT_THROW(arena->release(static_cast<char*>(all) + 64), InvalidArgument);
  arena->release(all);
  EXPECT_THROW(arena->allocate(SIZE_MAX - 8), IoError);  // no wrap-around to a small block
  EXPECT_EQ(arena->bytes_in_use(), 0u);
}

TEST(SharedBuffers, ABufferKeepsItsArenaMappedAfterTheCommunicatorIsGone) {
  SharedBuffer kept;
  with_comms(1, arena_options(), [&](Communicator& c) {
    // A world of one has no peers, hence no arena; use two ranks below.
    EXPECT_FALSE(c.has_shared_arena());
  });
  with_comms(2, arena_options(), [&](Communicator& c) {
    SharedBuffer b = c.alloc_shared(4096);
    std::memset(b.data(), 0x5a, 4096);
    if (c.rank() == 0) kept = std::move(b);
  });
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept.as<unsigned char>()[4095], 0x5a);  // still mapped
}

}  // namespace
}  // namespace cohort::comm
