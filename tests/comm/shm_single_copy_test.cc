// Shared-memory pairs: single-copy transfers (process_vm_readv). Ranks as threads: the kernel lets
// a process read its own memory, so the single-copy path runs here exactly as between processes
// (multiproc_test covers those).
#include <gtest/gtest.h>

#include <thread>

#include "cohort/comm/transport/context.h"
#include "cohort/rendezvous/hash_store.h"
#include "tests/comm/comm_test_util.h"

namespace cohort::comm::transport {
namespace {

using cohort::comm::testing::in_ms;
using cohort::comm::testing::run_ranks;

std::unique_ptr<Context> make(rendezvous::HashStore& store, int rank, DeviceOptions o) {
  o.transport = TransportKind::kShm;
  o.shm_ring_bytes = 64 << 10;
  return Context::create(Device(o), store, rank, 2, ContextOptions{});
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(i % 1013) * scale;
  return v;
}

// Sends `n` floats each way (one plain, one reduced) and returns what rank 0 read by single copy.
uint64_t exchange(const DeviceOptions& o, size_t n) {
  rendezvous::HashStore store;
  uint64_t single_copy = 0;
  run_ranks(2, [&](int r) {
    auto ctx = make(store, r, o);
    // A first message: each side has published whether it can read the other by then.
    int hello = r, peer_hello = -1;
    std::vector<Request> first = {ctx->recv(1 - r, &peer_hello, sizeof(int), Header{0, {}}),
                                  ctx->send(1 - r, &hello, sizeof(int), Header{0, {}})};
    ctx->wait_all(first, in_ms(10000));
    auto mine = ramp(n, r ? 2.0f : 1.0f);
    std::vector<float> plain(n, -1.0f), reduced = mine;
    RecvReduce sum{DType::f32, ReduceOp::sum};
    std::vector<Request> q;
    q.push_back(ctx->recv(1 - r, plain.data(), n * 4, Header{1, {}}));
    q.push_back(ctx->recv(1 - r, reduced.data(), n * 4, Header{2, {}}, &sum));
    q.push_back(ctx->send(1 - r, mine.data(), n * 4, Header{1, {}}));
    q.push_back(ctx->send(1 - r, mine.data(), n * 4, Header{2, {}}));
    ctx->wait_all(q, in_ms(10000));
    auto theirs = ramp(n, r ? 1.0f : 2.0f);
    EXPECT_EQ(plain, theirs) << "rank " << r;
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(reduced[i], theirs[i] + mine[i]) << "rank " << r;
    if (r == 0) single_copy = ctx->single_copy_bytes_received();
  });
  return single_copy;
}

TEST(ShmSingleCopy, LargeMessagesAreReadStraightFromTheSender) {
  DeviceOptions o;
  o.shm_single_copy_bytes = 64 << 10;
  const size_t n = 300007;  // ~1.2 MB: many reduce pieces, odd tail
  EXPECT_EQ(exchange(o, n), 2 * n * 4);
}

TEST(ShmSingleCopy, SmallMessagesStayInTheRing) {
  DeviceOptions o;
  o.shm_single_copy_bytes = 64 << 10;
  EXPECT_EQ(exchange(o, 1000), 0u);
}

TEST(ShmSingleCopy, DeniedOrDisabledFallsBackToTheRing) {
  DeviceOptions denied;
  denied.faults.deny_single_copy = true;
  EXPECT_EQ(exchange(denied, 300007), 0u);
  DeviceOptions off;
  off.shm_single_copy_bytes = 0;
  EXPECT_EQ(exchange(off, 300007), 0u);
}

}  // namespace
}  // namespace cohort::comm::transport
