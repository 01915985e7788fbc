// Samplers (incl. distributed) and the prefetching Loader.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "cohort/data/loader.h"
#include "cohort/data/sampler.h"
#include "tests/unit/data_test_util.h"

namespace cohort::data {
namespace {

// y = x = the sample's index; optionally slow, optionally failing at one index.
class IndexDataset final : public Dataset {
 public:
  explicit IndexDataset(int64_t n, int64_t fail_at = -1,
                        std::chrono::milliseconds delay = std::chrono::milliseconds(0))
      : n_(n), fail_at_(fail_at), delay_(delay) {}
  int64_t size() const override { return n_; }
  Batch get_batch(std::span<const int64_t> idx) const override {
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    Batch b{empty({int64_t(idx.size()), 1}), empty({int64_t(idx.size())}, DType::i64)};
    for (size_t k = 0; k < idx.size(); ++k) {
      COHORT_CHECK_ARG(idx[k] != fail_at_, "IndexDataset: sample ", idx[k], " is corrupt");
      b.x.data<float>()[k] = float(idx[k]);
      b.y.data<int64_t>()[k] = idx[k];
    }
    return b;
  }

 private:
  int64_t n_, fail_at_;
  std::chrono::milliseconds delay_;
};

std::vector<std::vector<int64_t>> drain(Loader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& [x, y] : loader) out.push_back(y.to_vector<int64_t>());
  return out;
}

std::vector<int64_t> flatten(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> v;
  for (const auto& b : batches) v.insert(v.end(), b.begin(), b.end());
  return v;
}

TEST(Sampler, ShardsCoverTheDataWithBothPolicies) {
  for (auto [size, world] : std::vector<std::pair<int64_t, int>>{
           {10, 1}, {10, 3}, {7, 4}, {3, 4}, {12, 4}, {0, 2}, {1001, 8}}) {
    for (bool shuffle : {false, true}) {
      for (bool drop : {false, true}) {
        SCOPED_TRACE(testing::Message() << "size " << size << " world " << world << " shuffle "
                                        << shuffle << " drop_last " << drop);
        std::vector<int64_t> all;
        for (int r = 0; r < world; ++r) {
          DistributedSampler s(size, r, world, {.shuffle = shuffle, .seed = 5, .drop_last = drop});
          s.set_epoch(3);
          auto mine = s.indices();
          int64_t want = drop ? size / world : (size + world - 1) / world;
          ASSERT_EQ(int64_t(mine.size()), want);
          ASSERT_EQ(s.num_samples(), want);
          all.insert(all.end(), mine.begin(), mine.end());
        }
        std::map<int64_t, int> seen;
        for (int64_t i : all) {
          ASSERT_TRUE(i >= 0 && i < size);
          ++seen[i];
        }
        if (drop) {  // disjoint; only the tail (size % world samples) is missing
          EXPECT_EQ(int64_t(seen.size()), int64_t(all.size()));
          EXPECT_EQ(size - int64_t(seen.size()), size % world);
        } else {  // every sample; the padding repeats (size - padding) earlier ones
          EXPECT_EQ(int64_t(seen.size()), size);
          EXPECT_EQ(int64_t(all.size()) - size, (world - size % world) % world);
        }
      }
    }
  }
}

// Elastic recovery re-deals the rest of an epoch (sampler skip): the batches the old world
// of 4 trained on plus what the new world of 3 takes are every sample exactly once.
TEST(Sampler, ASkipRedealsTheRestOfTheEpochWithNothingSkippedOrRepeated) {
  const int64_t n = 1000, batch = 8, done_batches = 10;
  std::multiset<int64_t> seen;
  for (int r = 0; r < 4; ++r) {
    DistributedSampler old(n, r, 4, {.shuffle = true, .seed = 5, .drop_last = true});
    old.set_epoch(3);
    std::vector<int64_t> mine = old.indices();
    seen.insert(mine.begin(), mine.begin() + done_batches * batch);
  }
  const int64_t skip = done_batches * batch * 4;
  for (int r = 0; r < 3; ++r) {
    DistributedSampler rest(n, r, 3, {.shuffle = true, .seed = 5, .drop_last = true, .skip = skip});
    rest.set_epoch(3);
    EXPECT_EQ(rest.num_samples(), (n - skip) / 3);
    for (int64_t i : rest.indices()) seen.insert(i);
  }
  // drop_last leaves (n - skip) % 3 = 2 out; every other sample exactly once.
  EXPECT_EQ(int64_t(seen.size()), n - (n - skip) % 3);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), seen.size());
}

TEST(Sampler, MatchesTorchLayoutWithoutShuffle) {
  auto shard = [](int r, bool drop) {
    return DistributedSampler(10, r, 4, {.shuffle = false, .drop_last = drop}).indices();
  };
  EXPECT_EQ(shard(0, false), (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(shard(2, false), (std::vector<int64_t>{2, 6, 0}));  // padded from the start
  EXPECT_EQ(shard(3, false), (std::vector<int64_t>{3, 7, 1}));
  EXPECT_EQ(shard(3, true), (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(DistributedSampler::sequential(4).indices(), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(Sampler, EpochChangesOrderDeterministically) {
  DistributedSampler a(100, 1, 3, {.seed = 9}), b(100, 1, 3, {.seed = 9});
  auto e0 = a.indices();
  EXPECT_EQ(e0, b.indices());
  a.set_epoch(1);
  EXPECT_NE(a.indices(), e0);
  a.set_epoch(0);
  EXPECT_EQ(a.indices(), e0);
  EXPECT_NE(DistributedSampler(100, 1, 3, {.seed = 10}).indices(), e0);
  // Platform independence: a pinned permutation (Fisher-Yates over Philox, not std::shuffle).
  EXPECT_EQ(random_permutation(8, 42), random_permutation(8, 42));
  auto p = random_permutation(1000, 1);
  std::sort(p.begin(), p.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(p[size_t(i)], i);
}

TEST(Sampler, PermutationsAreUniform) {
  std::map<std::vector<int64_t>, int> counts;
  for (uint64_t seed = 0; seed < 6000; ++seed) ++counts[random_permutation(3, seed)];
  ASSERT_EQ(counts.size(), 6u);
  for (const auto& [perm, c] : counts) EXPECT_NEAR(c, 1000, 150);
}

TEST(Sampler, InvalidRankOrWorldNamesThem) {
  expect_error<InvalidArgument>([] { DistributedSampler(10, 4, 4); }, {"rank 4", "world 4"});
  expect_error<InvalidArgument>([] { DistributedSampler(10, -1, 2); }, {"rank -1", "world 2"});
  expect_error<InvalidArgument>([] { DistributedSampler(10, 0, 0); }, {"world 0"});
  DistributedSampler s(10, 0, 2);
  expect_error<InvalidArgument>([&] { s.bind_size(11); }, {"10", "11"});
  expect_error<InvalidArgument>([] { DistributedSampler(0, 1).num_samples(); }, {"size"});
}

TEST(Loader, EverySampleOncePerEpochAndLen) {
  for (bool drop : {false, true}) {
    Loader loader(IndexDataset(10), {.batch = 3, .shuffle = true, .seed = 2, .drop_last = drop});
    EXPECT_EQ(loader.len(), drop ? 3 : 4);
    auto epoch0 = drain(loader);
    ASSERT_EQ(int64_t(epoch0.size()), loader.len());
    EXPECT_EQ(epoch0[0].size(), 3u);
    auto seen = flatten(epoch0);
    std::vector<int64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::set<int64_t>(sorted.begin(), sorted.end()).size(), sorted.size());
    EXPECT_EQ(sorted.size(), drop ? 9u : 10u);
    EXPECT_EQ(flatten(drain(loader)), seen);  // same epoch, same order
    loader.set_epoch(1);
    EXPECT_NE(flatten(drain(loader)), seen);
  }
}

TEST(Loader, PrefetchDoesNotChangeTheBatches) {
  auto run = [](int prefetch) {
    Loader loader(IndexDataset(50), {.batch = 4, .shuffle = true, .seed = 1, .prefetch = prefetch});
    loader.set_epoch(2);
    return drain(loader);
  };
  auto inline_batches = run(0);
  EXPECT_EQ(run(1), inline_batches);
  EXPECT_EQ(run(2), inline_batches);
  EXPECT_EQ(run(8), inline_batches);
}

TEST(Loader, DistributedShardsCoverTheDataset) {
  std::vector<int64_t> all;
  for (int r = 0; r < 3; ++r) {
    Loader loader(IndexDataset(20), {.batch = 2, .sampler = DistributedSampler(r, 3)});
    EXPECT_EQ(loader.len(), 4);  // ceil(20 / 3) = 7 samples per rank
    auto v = flatten(drain(loader));
    all.insert(all.end(), v.begin(), v.end());
  }
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 20u);
  EXPECT_EQ(all.size(), 21u);
  expect_error<InvalidArgument>(
      [] { Loader(IndexDataset(20), {.sampler = DistributedSampler(19, 0, 1)}); }, {"19", "20"});
  expect_error<InvalidArgument>([] { Loader(IndexDataset(20), {.batch = 0}); }, {"batch 0"});
}

TEST(Loader, ResumesAtABatchWithinTheEpoch) {
  for (int prefetch : {0, 2}) {
    Loader loader(IndexDataset(23), {.batch = 4, .shuffle = true, .seed = 3, .prefetch = prefetch});
    loader.set_epoch(5);
    auto full = drain(loader);
    loader.resume_at(4);
    std::vector<int64_t> indices;
    std::vector<std::vector<int64_t>> rest;
    for (auto it = loader.begin(); it != loader.end(); ++it) {
      indices.push_back(it.index());
      rest.push_back(it->y.to_vector<int64_t>());
    }
    EXPECT_EQ(indices, (std::vector<int64_t>{4, 5}));
    EXPECT_EQ(rest, std::vector<std::vector<int64_t>>(full.begin() + 4, full.end()));
    EXPECT_EQ(drain(loader), full);  // one-shot: the next pass starts at 0
    loader.resume_at(6);
    EXPECT_TRUE(drain(loader).empty());
    expect_error<InvalidArgument>([&] { loader.resume_at(7); }, {"resume_at(7)", "6 batches"});
  }
}

TEST(Loader, ProducerExceptionReachesTheConsumerInOrder) {
  for (int prefetch : {0, 2}) {
    Loader loader(IndexDataset(20, /*fail_at=*/9), {.batch = 4, .prefetch = prefetch});
    int64_t got = 0;
    try {
      for (auto& batch : loader) got += batch.y.numel();
      ADD_FAILURE() << "no exception";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("sample 9 is corrupt"), std::string::npos);
    }
    EXPECT_EQ(got, 8);  // the two batches before the failing one were delivered
    // The loader is usable again after a failed pass.
    Loader ok(IndexDataset(6), {.batch = 4, .prefetch = prefetch});
    EXPECT_EQ(drain(ok).size(), 2u);
  }
}

TEST(Loader, EarlyDestructionAndRestartDoNotHang) {
  const auto t0 = std::chrono::steady_clock::now();
  {
    Loader loader(IndexDataset(1000, -1, std::chrono::milliseconds(2)), {.batch = 1});
    for (auto& b : loader) {
      (void)b;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // producer fills the queue
      break;
    }
    auto it = loader.begin();  // restarting mid-epoch stops the old pass
    EXPECT_EQ(it->y.item<int64_t>(), 0);
  }  // destroyed with a producer waiting for room
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(Loader, ConsumerWaitHasADeadline) {
  Loader loader(IndexDataset(4, -1, std::chrono::milliseconds(300)),
                {.batch = 2, .timeout = std::chrono::milliseconds(20)});
  expect_error<Timeout>([&] { loader.begin(); }, {"batch 0 of epoch 0", "20 ms"});
}

}  // namespace
}  // namespace cohort::data
