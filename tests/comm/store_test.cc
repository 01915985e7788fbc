// Store semantics, checked identically on every implementation (HashStore, PrefixStore over
// it, TcpStore, PrefixStore over TcpStore): what a rank relies on when it rendezvous.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/rendezvous/hash_store.h"
#include "cohort/rendezvous/prefix_store.h"
#include "cohort/rendezvous/tcp_store.h"
#include "cohort/rendezvous/tcp_store_server.h"

namespace cohort::rendezvous {
namespace {

using namespace std::chrono_literals;

// Builds stores of one kind; each store() is a fresh client of the same underlying data, like
// the ranks of one job.
class StoreFactory {
 public:
  explicit StoreFactory(const std::string& kind) : kind_(kind) {
    if (kind_.find("tcp") != std::string::npos) {
      TcpStoreServerOptions so;
      so.secret = secret_;
      server_ = std::make_unique<TcpStoreServer>(so);
    } else {
      hash_ = std::make_shared<HashStore>(StoreOptions{5s});
    }
  }
  std::shared_ptr<Store> store() {
    std::shared_ptr<Store> base = hash_;
    if (server_) {
      TcpStoreOptions co;
      co.port = server_->port();
      co.secret = secret_;
      co.timeout = 5s;
      base = std::make_shared<TcpStore>(co);
    }
    if (kind_.starts_with("prefix")) return std::make_shared<PrefixStore>(base, "job7");
    return base;
  }
  std::shared_ptr<Store> raw() { return hash_; }

 private:
  std::string kind_;
  net::Secret secret_ = net::Secret::generate();
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<HashStore> hash_;
};

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  StoreFactory factory_{GetParam()};
};

TEST_P(StoreTest, SetGetOverwriteAndStrings) {
  auto s = factory_.store();
  s->set("a", Bytes{1, 2, 0, 255});
  EXPECT_EQ(s->get("a"), (Bytes{1, 2, 0, 255}));
  s->set_string("a", "hello");
  EXPECT_EQ(s->get_string("a"), "hello");
  s->set("empty", Bytes{});
  EXPECT_EQ(s->get("empty", 100ms), Bytes{});
  // Another client sees the same data.
  EXPECT_EQ(factory_.store()->get_string("a"), "hello");
}

TEST_P(StoreTest, AddCountsAndKeepsDecimalText) {
  auto s = factory_.store();
  EXPECT_EQ(s->add("n", 5), 5);
  EXPECT_EQ(s->add("n", -7), -2);
  EXPECT_EQ(s->get_string("n"), "-2");
  s->set_string("text", "abc");
  try {
    s->add("text", 1);
    FAIL() << "add to a non-counter must throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("text'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a decimal integer"), std::string::npos) << e.what();
  }
  s->set_string("big", "9223372036854775807");
  EXPECT_THROW(s->add("big", 1), InvalidArgument);
  // The connection is still good after a rejected request.
  EXPECT_EQ(s->add("n", 2), 0);
}

TEST_P(StoreTest, CompareSet) {
  auto s = factory_.store();
  Bytes a{'a'}, b{'b'}, c{'c'};
  // Absent key: only an empty expected matches.
  EXPECT_EQ(s->compare_set("k", a, b), Bytes{});
  EXPECT_FALSE(s->check({"k"}));
  EXPECT_EQ(s->compare_set("k", {}, a), a);
  EXPECT_EQ(s->compare_set("k", b, c), a);  // mismatch: unchanged, current returned
  EXPECT_EQ(s->compare_set("k", a, c), c);
  EXPECT_EQ(s->get("k"), c);
}

TEST_P(StoreTest, DeleteAndCheck) {
  auto s = factory_.store();
  s->set_string("x", "1");
  s->set_string("y", "2");
  EXPECT_TRUE(s->check({"x", "y"}));
  EXPECT_FALSE(s->check({"x", "nope"}));
  EXPECT_TRUE(s->check({}));
  EXPECT_TRUE(s->delete_key("x"));
  EXPECT_FALSE(s->delete_key("x"));
  EXPECT_FALSE(s->check({"x"}));
  EXPECT_THROW(s->get("x", 50ms), Timeout);
}

TEST_P(StoreTest, BlockingGetAndWaitAreReleasedByAnotherClient) {
  auto reader = factory_.store();
  auto writer = factory_.store();
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    writer->set_string("late", "here");
    std::this_thread::sleep_for(20ms);
    writer->set_string("later", "too");
  });
  auto start = Clock::now();
  EXPECT_EQ(reader->get_string("late", 3s), "here");
  reader->wait({"late", "later"}, 3s);
  EXPECT_LT(Clock::now() - start, 2s);
  t.join();
}

TEST_P(StoreTest, TimeoutNamesTheMissingKeysAndElapsedTime) {
  auto s = factory_.store();
  s->set_string("present", "1");
  auto start = Clock::now();
  try {
    s->get("missing/key", 150ms);
    FAIL() << "expected Timeout";
  } catch (const Timeout& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("get timed out after 0."), std::string::npos) << m;
    EXPECT_NE(m.find("(timeout 0.150 s)"), std::string::npos) << m;
    EXPECT_NE(m.find("missing/key'"), std::string::npos) << m;
    EXPECT_NE(m.find(s->describe().substr(0, 8)), std::string::npos) << m;
  }
  EXPECT_GE(Clock::now() - start, 150ms);
  try {
    s->wait({"present", "absent1", "absent2"}, 100ms);
    FAIL() << "expected Timeout";
  } catch (const Timeout& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("absent1', '"), std::string::npos) << m;
    EXPECT_EQ(m.find("present'"), std::string::npos) << "only missing keys are named: " << m;
  }
  // The default timeout applies when none is passed.
  s->set_timeout(80ms);
  EXPECT_THROW(s->wait({"absent1"}), Timeout);
  // And the store still works after timeouts.
  EXPECT_EQ(s->get_string("present"), "1");
}

TEST_P(StoreTest, BadArgumentsAreRejected) {
  auto s = factory_.store();
  EXPECT_THROW(s->set("", Bytes{}), InvalidArgument);
  EXPECT_THROW(s->get("k", Millis(-1)), InvalidArgument);
  EXPECT_THROW(s->set(std::string(kMaxKeyBytes + 1, 'k'), Bytes{}), InvalidArgument);
}

TEST_P(StoreTest, ConcurrentAddsFromManyClientsAllCount) {
  constexpr int kClients = 16, kAdds = 40;
  std::vector<std::shared_ptr<Store>> stores;
  for (int i = 0; i < kClients; ++i) stores.push_back(factory_.store());
  std::vector<std::thread> threads;
  std::atomic<int64_t> max_seen{0};
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      for (int j = 0; j < kAdds; ++j) {
        int64_t v = stores[i]->add("counter", 1);
        int64_t prev = max_seen.load();
        while (v > prev && !max_seen.compare_exchange_weak(prev, v)) {
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(stores[0]->add("counter", 0), kClients * kAdds);
  EXPECT_EQ(max_seen.load(), kClients * kAdds);
}

TEST_P(StoreTest, OneStoreSharedByThreadsDoesNotSerializeBlockingCalls) {
  // A get() blocked in one thread must not delay a set() from another thread on the same store.
  auto s = factory_.store();
  std::thread t([&] { EXPECT_EQ(s->get_string("ping", 3s), "x"); });
  std::this_thread::sleep_for(30ms);
  s->set_string("ping", "x");
  t.join();
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreTest,
                         ::testing::Values("hash", "prefix_hash", "tcp", "prefix_tcp"));

TEST(Store, ValuesOverTheCapAreRejectedBeforeAnyWork) {
  HashStore s;
  EXPECT_THROW(s.set("k", Bytes(kMaxValueBytes + 1)), InvalidArgument);
  EXPECT_FALSE(s.check({"k"}));
}

TEST(PrefixStore, NamespacesDoNotCollide) {
  auto base = std::make_shared<HashStore>(StoreOptions{2s});
  PrefixStore a(base, "groupA"), b(base, "groupB");
  a.set_string("rank0", "a");
  b.set_string("rank0", "b");
  EXPECT_EQ(a.get_string("rank0"), "a");
  EXPECT_EQ(b.get_string("rank0"), "b");
  EXPECT_EQ(base->get_string("groupA/rank0"), "a");
  EXPECT_FALSE(b.check({"only_in_a"}));
  EXPECT_EQ(a.timeout(), 2s);
  auto nested = std::make_shared<PrefixStore>(base, "outer");
  PrefixStore inner(nested, "inner");
  inner.set_string("k", "v");
  EXPECT_EQ(base->get_string("outer/inner/k"), "v");
  EXPECT_THROW(PrefixStore(base, ""), InvalidArgument);
  EXPECT_THROW(PrefixStore(nullptr, "p"), InvalidArgument);
  try {
    a.get("absent", 20ms);
    FAIL();
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("'groupA/absent'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cohort::rendezvous
