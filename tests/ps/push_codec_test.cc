// Compressed pushes (ps/push_codec.h) in one process: a stream's encode/decode with error
// feedback and random-k's per-worker indices; BSP over two servers with fp16 and bf16 pushes;
// ASP with top-k; the refusal of a push in another codec or of another size, naming the worker
// and the keys, and of a worker with other ps.compression keys at hello; and a restarted server
// that gets the kept (encoded) push replayed as it was.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <thread>

#include "cohort/net/service/client.h"
#include "cohort/optim/sgd.h"
#include "cohort/ps/server.h"
#include "cohort/ps/worker.h"
#include "cohort/rendezvous/hash_store.h"

namespace cohort::ps {
namespace {

using namespace std::chrono_literals;
using compress::Method;

constexpr double kLr = 0.5;

NamedTensors model() {
  return {{"w", from_vector({1, 2, 3, 4}, {2, 2})}, {"b", from_vector({1, 1, 1}, {3})}};
}

ServerOptions server_options(int index, int servers, int workers, PushCompression c,
                             Mode mode = Mode::kBsp) {
  ServerOptions o;
  o.index = index;
  o.num_servers = servers;
  o.num_workers = workers;
  o.params = model();
  o.secret_policy = net::SecretPolicy::kAllowInsecure;
  o.consistency.mode = mode;
  o.compression = c;
  o.make_optimizer = [](optim::NamedParams p) {
    return std::make_unique<optim::SGD>(std::move(p), optim::SgdOptions{.lr = kLr});
  };
  o.make_schedule = [](int64_t) { return std::make_unique<optim::ConstantLr>(kLr); };
  return o;
}

struct Job {
  Job(int servers, int workers, PushCompression c, Mode mode = Mode::kBsp) : compression(c) {
    for (int i = 0; i < servers; ++i) {
      this->servers.push_back(
          std::make_unique<ParamServer>(server_options(i, servers, workers, c, mode)));
      publish_server(*store, i, this->servers.back()->address());
    }
  }
  WorkerOptions worker(int rank, int workers) const {
    WorkerOptions w{.rank = rank,
                    .num_workers = workers,
                    .num_servers = int(servers.size()),
                    .store = store,
                    .timeout = 5s};
    w.secret_policy = net::SecretPolicy::kAllowInsecure;
    w.compression = compression;
    return w;
  }
  PushCompression compression;
  std::shared_ptr<rendezvous::Store> store = std::make_shared<rendezvous::HashStore>();
  std::vector<std::unique_ptr<ParamServer>> servers;
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// Error feedback over a stream: what the server decoded plus the worker's residual is every
// gradient pushed, whatever the codec dropped on the way.
TEST(PsPushCodec, TopKStreamLosesNothingOverSteps) {
  PushCompression c{.method = Method::kTopK, .ratio = 0.3};
  PushEncoder enc(c, 1, 0);
  PushDecoder dec(c, 0, 2);
  const KeyRange range{0, 7};
  const std::vector<float> g = {0.5f, -2, 0.25f, 1, -0.125f, 3, 0.75f};
  std::vector<float> decoded(7, 0.0f);
  for (int64_t step = 0; step < 5; ++step) {
    Bytes frame = enc.encode(step, range, g);
    EXPECT_EQ(frame.size(), 32 + enc.message_bytes(7));
    Push p = decode_push(frame);
    EXPECT_EQ(p.codec, uint8_t(Method::kTopK));
    dec.check(p, 1, range, "server");
    dec.decode_add(p, 1, decoded);
  }
  for (size_t i = 0; i < 7; ++i) EXPECT_FLOAT_EQ(decoded[i] + enc.residual()[i], 5 * g[i]) << i;
}

// Random-k sends no indices: the server derives them from the worker's own seed and the step
// in the header, and puts each value back where the worker took it from.
TEST(PsPushCodec, RandomKIndicesFollowFromTheWorkersSeedAndTheStep) {
  PushCompression c{.method = Method::kRandomK, .ratio = 0.3, .error_feedback = false};
  PushDecoder dec(c, 1, 3);
  std::vector<float> g(50);
  for (size_t i = 0; i < g.size(); ++i) g[i] = float(i + 1);
  for (int rank : {0, 2}) {
    PushEncoder enc(c, rank, 1);
    for (int64_t step : {0, 7}) {
      std::vector<float> out(50, 0.0f);
      dec.decode_add(decode_push(enc.encode(step, {0, 50}, g)), rank, out);
      int sent = 0;
      for (size_t i = 0; i < 50; ++i) {
        if (out[i] == 0) continue;
        EXPECT_EQ(out[i], g[i]) << "rank " << rank << " step " << step << " index " << i;
        ++sent;
      }
      EXPECT_EQ(sent, 15);
    }
  }
}

// fp16 and bf16 carry 1 and 2 exactly: the servers' average is the uncompressed one, and the
// worker pushed half the bytes.
TEST(PsPushCodec, BspAveragesDecodedFp16AndBf16PushesOverTwoServers) {
  for (Method m : {Method::kFp16, Method::kBf16}) {
    Job job(2, 2, {.method = m});
    std::vector<std::vector<float>> got(2);
    std::vector<TransferStats> stats(2);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank] {
        PsWorker w(job.worker(rank, 2), layout_of(model()));
        std::vector<float> values(7), grads(7, float(rank + 1));
        w.pull(values.data());
        stats[size_t(rank)] = w.push_pull(0, grads.data(), values.data());
        got[size_t(rank)] = values;
        w.bye();
      });
    }
    for (auto& t : threads) t.join();
    const std::vector<float> want = {1 - 0.75f, 2 - 0.75f, 3 - 0.75f, 4 - 0.75f,
                                     1 - 0.75f, 1 - 0.75f, 1 - 0.75f};
    EXPECT_EQ(got[0], want) << compress::method_name(m);
    EXPECT_EQ(got[1], want) << compress::method_name(m);
    EXPECT_EQ(stats[0].bytes_sent, 14u);  // 7 values, 2 bytes each
    EXPECT_EQ(stats[0].raw_bytes, 28u);
    for (auto& s : job.servers) s->wait(5s);
  }
}

// ASP applies each decoded push at once; with top-k and error feedback every coordinate of a
// constant gradient is pushed in turn, so over the steps all of them move.
TEST(PsPushCodec, AspAppliesDecodedTopKPushes) {
  Job job(2, 1, {.method = Method::kTopK, .ratio = 0.34}, Mode::kAsp);
  PsWorker w(job.worker(0, 1), layout_of(model()));
  std::vector<float> values(7), grads(7, 0.25f);
  w.pull(values.data());
  for (int step = 0; step < 12; ++step) w.push_pull(step, grads.data(), values.data());
  const std::vector<float> init = {1, 2, 3, 4, 1, 1, 1};
  for (size_t i = 0; i < 7; ++i) EXPECT_LT(values[i], init[i] - 0.25f) << i;
  w.bye();
  for (auto& s : job.servers) s->wait(5s);
}

TEST(PsPushCodec, APushInAnotherCodecOrOfAnotherSizeIsRefusedNamingTheWorkerAndTheKeys) {
  Job job(2, 1, {.method = Method::kFp16});
  net::service::Client raw({.port = uint16_t(std::stoi(job.servers[0]->address().substr(10))),
                            .secret_policy = net::SecretPolicy::kAllowInsecure});
  // The hello agrees (a real worker's would not: PsWorker sends its own spec), then the
  // pushes do not.
  raw.request(encode_hello({0, 1, 0, layout_of(model()), codec_spec(job.compression)}));
  std::vector<float> g(3, 0.0f);
  std::string m = message_of([&] { raw.request(encode_push(0, 0, {0, 3}, g.data())); });
  EXPECT_NE(m.find("parameter server 0: worker 0 pushed keys [0, 3) compressed as 'none' (0), "
                   "this server expects 'fp16'"),
            std::string::npos)
      << m;
  Bytes topk = encode_push_frame(0, 0, {0, 3}, uint8_t(Method::kTopK), 8);
  m = message_of([&] { raw.request(topk); });
  EXPECT_NE(m.find("worker 0 pushed keys [0, 3) compressed as 'topk' (3)"), std::string::npos) << m;
  Bytes short_push = encode_push_frame(0, 0, {0, 3}, uint8_t(Method::kFp16), 4);
  m = message_of([&] { raw.request(short_push); });
  EXPECT_NE(m.find("worker 0 pushed a 4-byte fp16 message for keys [0, 3); this server owns "
                   "keys [0, 3) and expects 6 bytes for their 3 values"),
            std::string::npos)
      << m;
  // And an uncompressed server refuses a compressed push.
  Job plain(1, 1, {});
  net::service::Client raw2({.port = uint16_t(std::stoi(plain.servers[0]->address().substr(10))),
                             .secret_policy = net::SecretPolicy::kAllowInsecure});
  raw2.request(encode_hello({0, 1, 0, layout_of(model())}));
  Bytes fp16 = encode_push_frame(0, 0, {0, 7}, uint8_t(Method::kFp16), 14);
  m = message_of([&] { raw2.request(fp16); });
  EXPECT_NE(m.find("compressed as 'fp16' (1), this server expects 'none'"), std::string::npos) << m;
}

// What a push's size cannot show (QSGD's levels, the seed of random-k's indices) is agreed at
// hello: a worker with other ps.compression keys is refused before it pushes, naming them.
TEST(PsPushCodec, AWorkerWithOtherCompressionKeysIsRefusedAtHello) {
  Job job(1, 1, {.method = Method::kQsgd, .levels = 8, .seed = 5});
  auto refusal = [&](PushCompression c) {
    WorkerOptions w = job.worker(0, 1);
    w.compression = c;
    return message_of([&] { PsWorker worker(w, layout_of(model())); });
  };
  std::string m = refusal({.method = Method::kQsgd, .levels = 4, .seed = 5});
  EXPECT_NE(m.find("parameter server 0: worker 0 pushes with ps.compression = 'qsgd', "
                   "ps.qsgd_levels = 4, this server expects ps.compression = 'qsgd', "
                   "ps.qsgd_levels = 8; every worker and server must have the same "
                   "ps.compression keys"),
            std::string::npos)
      << m;
  m = refusal({.method = Method::kQsgd, .levels = 8, .seed = 6});
  EXPECT_NE(m.find("with another run.seed"), std::string::npos) << m;
  m = refusal({});
  EXPECT_NE(m.find("worker 0 pushes with ps.compression = 'none', this server expects "
                   "ps.compression = 'qsgd'"),
            std::string::npos)
      << m;
}

// A server that restarts from its checkpoint gets the worker's kept push replayed: the same
// encoded bytes (a re-encoding would add the residual twice), so the run ends exactly like an
// uninterrupted one.
TEST(PsPushCodec, ARestartedServerGetsTheKeptCompressedPushesReplayedAsTheyWere) {
  const std::string dir = ::testing::TempDir() + "ps_codec_ckpt_" + std::to_string(::getpid());
  const PushCompression c{.method = Method::kTopK, .ratio = 0.3};
  auto run = [&](bool restart) {
    std::filesystem::remove_all(dir);
    auto options = [&](bool restore) {
      ServerOptions o = server_options(0, 1, 1, c, Mode::kAsp);
      o.ckpt_dir = dir;
      o.ckpt_every = 2;
      o.restore = restore;
      return o;
    };
    auto store = std::make_shared<rendezvous::HashStore>();
    auto server = std::make_unique<ParamServer>(options(false));
    publish_server(*store, 0, server->address());
    WorkerOptions wo{.rank = 0, .num_workers = 1, .num_servers = 1, .store = store, .timeout = 5s};
    wo.secret_policy = net::SecretPolicy::kAllowInsecure;
    wo.compression = c;
    PsWorker w(wo, layout_of(model()));
    std::vector<float> values(7), g = {0.5f, -2, 0.25f, 1, -0.125f, 3, 0.75f};
    for (int step = 0; step < 8; ++step) {
      if (restart && step == 5) {  // the checkpoint holds steps 0..3: step 4 is replayed
        server.reset();
        server = std::make_unique<ParamServer>(options(true));
        publish_server(*store, 0, server->address());
      }
      w.push_pull(step, g.data(), values.data());
    }
    w.bye();
    server->wait(5s);
    return values;
  };
  const std::vector<float> whole = run(false);
  EXPECT_EQ(run(true), whole);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cohort::ps
