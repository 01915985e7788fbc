// Same-host pushes through a shared area (ps/shared_area.h, ps.shared_memory): the area's
// offer is checked before a server maps it, the frames that say "in the area" are strict, and a
// job whose links use areas computes exactly what it computes through the socket.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/net/service/client.h"
#include "tests/ps/ps_job.h"

namespace cohort::ps {
namespace {

bool in_dev_shm(const std::string& name) {
  return std::filesystem::exists("/dev/shm" + name);
}

TEST(PsSharedArea, AServerMapsTheWorkersAreaAndBothSeeEachOthersWrites) {
  auto mine = SharedArea::create(5, 0);
  ASSERT_TRUE(in_dev_shm(mine->offer().name));
  std::string why;
  auto theirs = SharedArea::open(mine->offer(), 5, &why);
  ASSERT_NE(theirs, nullptr) << why;
  mine->unlink();  // what the worker does once answered: the mappings stay
  EXPECT_FALSE(in_dev_shm(mine->offer().name));
  for (int i = 0; i < 5; ++i) mine->grads()[i] = float(i);
  theirs->values()[4] = 7.5f;
  EXPECT_EQ(theirs->grads()[3], 3.0f);
  EXPECT_EQ(mine->values()[4], 7.5f);
}

TEST(PsSharedArea, AnOfferThatDoesNotMatchIsDeclinedSayingWhy) {
  auto mine = SharedArea::create(5, 0);
  std::string why;
  EXPECT_EQ(SharedArea::open(mine->offer(), 6, &why), nullptr);  // another range's size
  EXPECT_NE(why.find("offers 5 keys, this server's model has 6"), std::string::npos) << why;
  SharedOffer forged = mine->offer();
  forged.token[0] ^= 1;  // another host's segment of the same name would carry another token
  EXPECT_EQ(SharedArea::open(forged, 5, &why), nullptr);
  EXPECT_NE(why.find("token"), std::string::npos) << why;
  SharedOffer elsewhere = mine->offer();
  elsewhere.name = "/cohort-arena-0000000000000000-9";  // not on this host
  EXPECT_EQ(SharedArea::open(elsewhere, 5, &why), nullptr);
  EXPECT_NE(why.find("cannot open"), std::string::npos) << why;
  for (const char* name : {"/etc-passwd", "/cohort-arena-x/../y", ""}) {
    SharedOffer odd = mine->offer();
    odd.name = name;
    EXPECT_EQ(SharedArea::open(odd, 5, &why), nullptr) << name;
    EXPECT_NE(why.find("is not a cohort shared area's name"), std::string::npos) << why;
  }
}

TEST(PsSharedArea, FramesThatPointIntoTheAreaAreStrict) {
  Bytes q = encode_shared_push(3, 7, {10, 20});
  Push p = decode_push(q);
  EXPECT_TRUE(p.shared);
  EXPECT_EQ(p.count, 10);
  EXPECT_EQ(p.grads, nullptr);
  Bytes padded = q;
  padded.push_back(0);  // a shared push carries no values
  EXPECT_THROW(decode_push(padded), InvalidArgument);
  Bytes flags = q;
  flags[30] = 2;  // an unknown flag
  EXPECT_THROW(decode_push(flags), InvalidArgument);

  Hello h{1, 2, 0, layout_of(model()), {}, SharedOffer{"/cohort-arena-ab-1", {}, 3}};
  h.shared->token[15] = 9;
  EXPECT_EQ(decode_hello(encode_hello(h)).shared, h.shared);
  EXPECT_FALSE(decode_hello(encode_hello({1, 2, 0, layout_of(model())})).shared.has_value());

  PushReply r{.version = 4, .shared = 1};
  Bytes a = encode_push_reply(r, nullptr, 3);
  std::vector<float> out(3), area = {1, 2, 3};
  EXPECT_EQ(decode_push_reply(a, out.data(), 3, "answer", area.data()).version, 4);
  EXPECT_EQ(out, area);
  // An answer that says "in the area" to a push that did not use one is refused.
  EXPECT_THROW(decode_push_reply(a, out.data(), 3, "answer"), InvalidArgument);
}

// A push marked as shared from a connection whose hello offered no area: refused, naming it.
TEST(PsSharedArea, ASharedPushWithoutAnAreaIsRefusedNamingTheWorker) {
  Job job(1, 1);
  net::service::Client raw(
      {.port = uint16_t(std::stoi(job.servers[0]->address().substr(10))), .secret = job.secret});
  raw.request(encode_hello({0, 1, 0, layout_of(model())}));
  const std::string m =
      message_of([&] { raw.request(encode_shared_push(0, 0, job.servers[0]->range())); });
  EXPECT_NE(m.find("parameter server 0: worker 0 pushed keys [0, 7) through a shared area, but "
                   "this server mapped none for it"),
            std::string::npos)
      << m;
}

// 2 workers, 2 servers, 30 steps of random gradients, BSP and ASP (one worker: a fixed
// order): the values every worker receives, through areas or the socket, bit for bit.
// in_area: the worker gathers its gradients straight into its area and reads the values there
// (what the strategy does: no copy at all), else it pushes from its own vectors.
std::vector<std::vector<float>> train(Mode mode, int workers, bool worker_shm, bool server_shm,
                                      bool in_area, int* links) {
  Consistency c;
  c.mode = mode;
  Job job(2, workers, c, Millis(0), server_shm);
  std::vector<std::vector<float>> got{size_t(workers)};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < workers; ++rank) {
    threads.emplace_back([&, rank] {
      WorkerOptions o = job.worker(rank, workers);
      o.shared_memory = worker_shm;
      PsWorker w(o, layout_of(model()));
      std::mt19937 gen{uint32_t(rank)};
      std::normal_distribution<float> normal;
      std::vector<float> own(14);
      float* grads = in_area ? w.grads_buffer() : own.data();
      float* values = in_area ? w.values_buffer() : own.data() + 7;
      ASSERT_NE(grads, nullptr);
      w.pull(values);
      for (int step = 0; step < 30; ++step) {
        for (int k = 0; k < 7; ++k) grads[k] = normal(gen);
        w.push_pull(step, grads, values);
        got[size_t(rank)].insert(got[size_t(rank)].end(), values, values + 7);
      }
      if (rank == 0) *links = w.shared_links();
      w.bye();
    });
  }
  for (auto& t : threads) t.join();
  for (auto& s : job.servers) s->wait(5s);
  return got;
}

TEST(PsSharedArea, AJobThroughSharedAreasComputesExactlyWhatItDoesThroughTheSocket) {
  for (auto [mode, workers] : {std::pair{Mode::kBsp, 2}, std::pair{Mode::kAsp, 1}}) {
    int links = -1;
    const auto in_area = train(mode, workers, true, true, true, &links);
    EXPECT_EQ(links, 2);  // both servers are on this host
    const auto copied = train(mode, workers, true, true, false, &links);
    EXPECT_EQ(links, 2);
    const auto socket = train(mode, workers, false, true, false, &links);
    EXPECT_EQ(links, 0);
    const auto declined = train(mode, workers, true, false, true, &links);
    EXPECT_EQ(links, 0);  // the servers said no: the socket, from the area's buffers
    EXPECT_EQ(in_area, socket);
    EXPECT_EQ(copied, socket);
    EXPECT_EQ(declined, socket);
  }
}

}  // namespace
}  // namespace cohort::ps
