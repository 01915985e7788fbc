// ordered_slot_mean (parallel/ordered_mean.h), ranks as threads: K slots reduced by any number
// of workers give the same bits as one process summing them in slot order, on every rank; a
// sum in another order (what an allreduce over fewer workers does) gives other bits for these
// inputs; shards smaller than the world and a world larger than the slots.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <random>

#include "cohort/parallel/ordered_mean.h"
#include "tests/comm/pg_test_util.h"

namespace cohort::parallel {
namespace {

// K slots of n floats spread over eight orders of magnitude, so the order of a sum shows.
std::vector<std::vector<float>> make_slots(int64_t slots, size_t n) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> mant(-1, 1);
  std::uniform_int_distribution<int> exp(-4, 4);
  std::vector<std::vector<float>> out(static_cast<size_t>(slots), std::vector<float>(n));
  for (auto& s : out)
    for (float& v : s) v = mant(gen) * std::pow(10.0f, float(exp(gen)));
  return out;
}

std::vector<float> in_slot_order(const std::vector<std::vector<float>>& g) {
  std::vector<float> out(g[0]);
  for (size_t k = 1; k < g.size(); ++k)
    for (size_t i = 0; i < out.size(); ++i) out[i] += g[k][i];
  for (float& v : out) v /= float(g.size());
  return out;
}

// Every rank's result with `workers` ranks.
std::vector<std::vector<float>> reduce_with(int workers, const std::vector<std::vector<float>>& g) {
  const int64_t slots = int64_t(g.size());
  const size_t n = g[0].size();
  std::vector<std::vector<float>> results(static_cast<size_t>(workers));
  comm::testing::with_groups(workers, [&](comm::ProcessGroup& pg) {
    std::vector<float> mine;
    for (int64_t k : slots_of_rank(slots, workers, pg.rank()))
      mine.insert(mine.end(), g[size_t(k)].begin(), g[size_t(k)].end());
    std::vector<float> out(n, -1.0f);
    ordered_slot_mean(pg, slots, mine.data(), n, out.data());
    results[size_t(pg.rank())] = out;
  });
  return results;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(OrderedSlotMean, AnyNumberOfWorkersGivesTheBitsOfTheSumInSlotOrder) {
  for (auto [slots, n] : {std::pair<int64_t, size_t>{4, 1009}, {5, 333}, {4, 2}}) {
    const auto g = make_slots(slots, n);
    const std::vector<float> want = in_slot_order(g);
    for (int workers = 1; workers <= slots; ++workers) {
      auto got = reduce_with(workers, g);
      for (int r = 0; r < workers; ++r)
        EXPECT_TRUE(same_bits(got[size_t(r)], want))
            << slots << " slots, n " << n << ", " << workers << " workers, rank " << r;
    }
  }
}

TEST(OrderedSlotMean, TheOrderMattersForTheseInputs) {
  // What two workers of an allreduce would do: each sums its own slots, then the two sums.
  const auto g = make_slots(4, 1009);
  std::vector<float> paired(g[0].size());
  for (size_t i = 0; i < paired.size(); ++i)
    paired[i] = ((g[0][i] + g[2][i]) + (g[1][i] + g[3][i])) / 4.0f;
  EXPECT_FALSE(same_bits(paired, in_slot_order(g)));
}

TEST(OrderedSlotMean, TheSlotsOfARankAreEveryWorkersStep) {
  EXPECT_EQ(slots_of_rank(4, 3, 0), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(slots_of_rank(4, 3, 2), (std::vector<int64_t>{2}));
  EXPECT_EQ(slots_of_rank(4, 4, 3), (std::vector<int64_t>{3}));
}

TEST(OrderedSlotMean, MoreWorkersThanSlotsIsRefused) {
  std::mutex m;
  std::vector<std::string> errors;
  comm::testing::with_groups(3, [&](comm::ProcessGroup& pg) {
    float in = 1, out = 0;
    try {
      ordered_slot_mean(pg, 2, &in, 1, &out);
    } catch (const InvalidArgument& e) {
      std::lock_guard<std::mutex> lock(m);
      errors.push_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NE(errors[0].find("2 slots for 3 workers"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace cohort::parallel
