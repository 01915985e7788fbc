// Transport layer: pairs over shm and tcp move bytes intact, in order, full duplex; reduce on
// receipt; and fail with the errors the design promises (mismatch, timeout, dead peer).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "cohort/comm/transport/context.h"
#include "cohort/net/auth.h"
#include "cohort/net/socket.h"
#include "cohort/rendezvous/hash_store.h"
#include "tests/comm/comm_test_util.h"

namespace cohort::comm::transport {
namespace {

using cohort::comm::testing::error_of;
using cohort::comm::testing::in_ms;
using cohort::comm::testing::run_ranks;

std::vector<uint8_t> pattern(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t((i * 131 + size_t(seed) * 17 + (i >> 9)) & 0xff);
  return v;
}

class TransportTest : public ::testing::TestWithParam<TransportKind> {
 protected:
  Device device() {
    DeviceOptions o;
    o.transport = GetParam();
    o.shm_ring_bytes = 64 << 10;  // small ring: messages below wrap around it several times
    return Device(o);
  }
  std::unique_ptr<Context> make(int rank, int size, int connect_ms = 10000) {
    ContextOptions co;
    co.connect_timeout = std::chrono::milliseconds(connect_ms);
    return Context::create(device(), store_, rank, size, co);
  }
  rendezvous::HashStore store_;
};

TEST_P(TransportTest, PairsUseTheRequestedTransport) {
  run_ranks(3, [&](int r) {
    auto ctx = make(r, 3);
    EXPECT_EQ(ctx->local_ranks(), 3);
    for (int p = 0; p < 3; ++p) {
      EXPECT_STREQ(ctx->pair_kind(p), p == r ? "self" : transport_name(GetParam()));
    }
  });
}

// Sizes: empty, one byte, odd, larger than the ring (streams in chunks around it).
TEST_P(TransportTest, FullDuplexMessagesArriveIntactAndInOrder) {
  const std::vector<size_t> sizes = {0, 1, 7, 1009, 200000, 64, 3};
  run_ranks(2, [&](int r) {
    auto ctx = make(r, 2);
    int peer = 1 - r;
    std::vector<std::vector<uint8_t>> out, in;
    std::vector<Request> reqs;
    for (size_t i = 0; i < sizes.size(); ++i) {
      out.push_back(pattern(sizes[i], r * 100 + int(i)));
      in.emplace_back(sizes[i], 0);
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      Header h{i, {1, 2, 3}};
      reqs.push_back(ctx->recv(peer, in[i].data(), sizes[i], h));
      reqs.push_back(ctx->send(peer, out[i].data(), sizes[i], h));
    }
    ctx->wait_all(reqs, in_ms(10000));
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(in[i], pattern(sizes[i], peer * 100 + int(i))) << "message " << i;
    }
  });
}

TEST_P(TransportTest, RecvReduceFoldsIncomingIntoBuffer) {
  const size_t n = 30011;  // prime, more than one staging buffer / ring of f32
  run_ranks(2, [&](int r) {
    auto ctx = make(r, 2);
    std::vector<float> mine(n), got(n);
    for (size_t i = 0; i < n; ++i) mine[i] = float(i % 97) * (r ? 0.5f : 1.0f) + float(r);
    got = mine;
    RecvReduce rr{DType::f32, ReduceOp::sum};
    Request rq = ctx->recv(1 - r, got.data(), n * 4, Header{9, {}}, &rr);
    Request sq = ctx->send(1 - r, mine.data(), n * 4, Header{9, {}});
    rq.wait(in_ms(10000));
    sq.wait(in_ms(10000));
    for (size_t i = 0; i < n; ++i) {
      float a = float(i % 97) * 1.0f + 0.0f, b = float(i % 97) * 0.5f + 1.0f;
      ASSERT_EQ(got[i], r == 0 ? b + a : a + b) << i;
    }
  });
}

TEST_P(TransportTest, HeaderMismatchNamesPeerAndBothTags) {
  run_ranks(2, [&](int r) {
    auto ctx = make(r, 2);
    int v = 42;
    if (r == 1) {
      ctx->send(0, &v, 4, Header{5, {}}).wait(in_ms(10000));
      return;
    }
    Request q = ctx->recv(1, &v, 4, Header{6, {}});
    std::string msg = error_of<Mismatch>([&] { q.wait(in_ms(10000)); });
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tag 6"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tag 5"), std::string::npos) << msg;
    // The pair is broken afterwards.
    EXPECT_THROW(ctx->recv(1, &v, 4, Header{6, {}}).wait(in_ms(100)), IoError);
  });
}

TEST_P(TransportTest, LengthMismatchIsAnError) {
  run_ranks(2, [&](int r) {
    auto ctx = make(r, 2);
    char buf[64] = {};
    if (r == 1) {
      ctx->send(0, buf, 16, Header{1, {}}).wait(in_ms(10000));
      return;
    }
    std::string msg = error_of<Mismatch>([&] {
      ctx->recv(1, buf, 8, Header{1, {}}).wait(in_ms(10000));
    });
    EXPECT_NE(msg.find("expected 8 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sent 16 bytes"), std::string::npos) << msg;
  });
}

TEST_P(TransportTest, SilentPeerTimesOutWithinDeadlineNamingIt) {
  run_ranks(2, [&](int r) {
    auto ctx = make(r, 2);
    int v = 0;
    if (r == 0) {
      auto start = std::chrono::steady_clock::now();
      Request q = ctx->recv(1, &v, 4, Header{});
      std::string msg = error_of<Timeout>([&] { q.wait(in_ms(200)); });
      auto took = std::chrono::steady_clock::now() - start;
      EXPECT_LT(took, std::chrono::milliseconds(1000));
      EXPECT_NE(msg.find("recv #0 from rank 1"), std::string::npos) << msg;
    }
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));  // alive, silent
  });
}

TEST_P(TransportTest, PeerClosingMidTransferIsIoErrorNamingIt) {
  run_ranks(2, [&](int r) {
    auto ctx = make(r, 2);
    std::vector<char> buf(100000);
    if (r == 1) {
      // Send part of what rank 0 expects, then go away.
      ctx->send(0, buf.data(), 100, Header{}).wait(in_ms(10000));
      ctx->close();
      return;
    }
    ctx->recv(1, buf.data(), 100, Header{}).wait(in_ms(10000));
    auto start = std::chrono::steady_clock::now();
    std::string msg = error_of<IoError>(
        [&] { ctx->recv(1, buf.data(), buf.size(), Header{}).wait(in_ms(5000)); });
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(3000));
    EXPECT_NE(msg.find("rank 1 closed"), std::string::npos) << msg;
  });
}

TEST_P(TransportTest, MissingRankTimesOutAtConnect) {
  std::string msg = error_of<Timeout>([&] { make(0, 2, 200); });
  EXPECT_NE(msg.find("info/1"), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(Kinds, TransportTest,
                         ::testing::Values(TransportKind::kShm, TransportKind::kTcp),
                         [](const auto& info) { return std::string(transport_name(info.param)); });

TEST(TcpTransport, WrongSecretIsRefused) {
  rendezvous::HashStore store;
  run_ranks(2, [&](int r) {
    DeviceOptions o;
    o.transport = TransportKind::kTcp;
    o.secret = net::Secret::generate();
    ContextOptions co;
    co.connect_timeout = std::chrono::milliseconds(800);
    if (r == 0) {
      std::string msg = error_of<Timeout>([&] { Context::create(Device(o), store, r, 2, co); });
      EXPECT_NE(msg.find("rank(s) 1"), std::string::npos) << msg;
    } else {
      std::string msg = error_of<IoError>([&] { Context::create(Device(o), store, r, 2, co); });
      EXPECT_NE(msg.find("secret"), std::string::npos) << msg;
    }
  });
}

// A hand-made rank 1 that authenticates and says hello like a real one, then sends bytes that
// are not a frame. Rank 0 must fail the recv with an IoError naming rank 1, and live on.
TEST(TcpTransport, GarbageFrameFromPeerIsIoErrorNamingIt) {
  rendezvous::HashStore store;
  DeviceOptions o;
  o.transport = TransportKind::kTcp;
  o.secret = net::Secret::generate();
  std::thread fake([&] {
    store.set_string("comm/info/1", "v2\ntcp\nfake-host\n-\n1\n-1\n");
    std::string addr = store.get_string("comm/info/0");
    addr = addr.substr(addr.find('\n', addr.find('\n', addr.find('\n') + 1) + 1) + 1);
    addr = addr.substr(0, addr.find('\n'));
    auto deadline = in_ms(5000);
    size_t colon = addr.rfind(':');
    net::Fd fd = net::connect_tcp(addr.substr(0, colon),
                                  uint16_t(std::stoi(addr.substr(colon + 1))), deadline, "rank 0");
    net::auth::answer_challenge(fd.get(), o.secret, "cohort-tcp-v1", deadline, "rank 0");
    const uint32_t hello[4] = {0x31485463u, 1, 2, 0};
    net::write_all(fd.get(), hello, sizeof(hello), deadline, "rank 0", "hello");
    const char garbage[64] = "GET / HTTP/1.1\r\nHost: example\r\n\r\n";
    net::write_all(fd.get(), garbage, sizeof(garbage), deadline, "rank 0", "garbage");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  });
  auto ctx = Context::create(Device(o), store, 0, 2);
  int v = 0;
  std::string msg = error_of<IoError>([&] { ctx->recv(1, &v, 4, Header{}).wait(in_ms(5000)); });
  EXPECT_NE(msg.find("bad frame magic"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
  fake.join();
}

TEST(TcpTransport, NonLoopbackBindWithoutSecretIsRejected) {
  rendezvous::HashStore store;
  DeviceOptions o;
  o.transport = TransportKind::kTcp;
  o.bind_address = "0.0.0.0";
  EXPECT_THROW(Context::create(Device(o), store, 0, 2), InvalidArgument);
}

TEST(Transport, SendToSelfIsInvalid) {
  rendezvous::HashStore store;
  auto ctx = Context::create(Device(), store, 0, 1);
  int v = 0;
  EXPECT_THROW(ctx->send(0, &v, 4, Header{}), InvalidArgument);
}

}  // namespace
}  // namespace cohort::comm::transport
