// Straggler detection's judgement (train/straggler.h), without processes: a rank slower than
// the median of the others by the factor for `patience` intervals in a row is named, the
// slowest first; a fast interval resets its streak; even slowness names nobody.
#include <gtest/gtest.h>

#include <thread>

#include "cohort/comm/communicator.h"
#include "cohort/rendezvous/hash_store.h"
#include "cohort/train/straggler.h"

namespace cohort::train {
namespace {

TEST(StragglerDetector, NamesARankSlowForPatienceIntervals) {
  StragglerDetector d({.every = 10, .factor = 1.5, .patience = 2});
  EXPECT_FALSE(d.judge({0.010, 0.020}));  // one slow interval is not yet a pattern
  auto f = d.judge({0.010, 0.021});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rank, 1);
  EXPECT_NEAR(f->factor, 2.1, 1e-9);
  EXPECT_EQ(f->intervals, 2);
  EXPECT_NEAR(f->others_median_s, 0.010, 1e-12);
  EXPECT_EQ(describe(*f, 10),
            "straggler: rank 1 median step 21.0 ms, 2.1x the median of the others (10.0 ms), "
            "slow for 2 intervals of 10 steps");
}

TEST(StragglerDetector, AFastIntervalResetsTheStreak) {
  StragglerDetector d({.every = 10, .factor = 1.5, .patience = 2});
  EXPECT_FALSE(d.judge({0.01, 0.02, 0.01}));
  EXPECT_FALSE(d.judge({0.01, 0.01, 0.01}));
  EXPECT_FALSE(d.judge({0.01, 0.02, 0.01}));
  EXPECT_TRUE(d.judge({0.01, 0.02, 0.01}));
}

TEST(StragglerDetector, UsesTheMedianOfTheOthersAndNamesTheSlowest) {
  StragglerDetector d({.every = 5, .factor = 1.5, .patience = 1});
  // Ranks 2 and 3 are both slow against the median of the others; 3 more so.
  auto f = d.judge({0.010, 0.011, 0.030, 0.040, 0.010});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rank, 3);
  EXPECT_NEAR(f->others_median_s, 0.0105, 1e-12);
}

TEST(StragglerDetector, EvenRanksAndOneRankNameNobody) {
  StragglerDetector d({.every = 10, .factor = 1.5, .patience = 1});
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(d.judge({0.010, 0.012, 0.011, 0.013}));
  EXPECT_FALSE(d.judge({0.5}));
  EXPECT_FALSE(d.judge({0.0, 0.0}));  // no time measured: no ratio
}

TEST(StragglerWatch, IsOffWithoutAGroup) {
  StragglerWatch w({.every = 1}, nullptr);
  for (int64_t s = 1; s <= 5; ++s) EXPECT_FALSE(w.after_step(s, 1.0));
  EXPECT_TRUE(w.take_record().is_null());
  EXPECT_TRUE(w.summary().empty());
}

// Two ranks as threads over a real group: rank 1 computes twice as long; every rank learns the
// verdict from the exchange at step 10 (patience 2 x every 5), rank 0's line names rank 1.
TEST(StragglerWatch, ExchangesOverAGroupAndNamesTheSlowRank) {
  auto store = std::make_shared<rendezvous::HashStore>();
  std::vector<std::optional<std::string>> lines(2);
  std::vector<nlohmann::json> records(2), summaries(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto group = comm::make_process_group(comm::Communicator::create(store, r, 2));
      StragglerWatch w({.every = 5, .factor = 1.5, .patience = 2}, group);
      for (int64_t step = 1; step <= 10; ++step) {
        auto line = w.after_step(step, r == 1 ? 0.02 : 0.01);
        if (step < 10) EXPECT_FALSE(line) << step;
        if (step == 10) lines[size_t(r)] = line;
      }
      records[size_t(r)] = w.take_record();
      summaries[size_t(r)] = w.summary();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(lines[size_t(r)]) << r;
    EXPECT_EQ(lines[size_t(r)]->rfind("straggler: rank 1 median step 20.0 ms, 2.0x", 0), 0u)
        << *lines[size_t(r)];
    EXPECT_EQ(records[size_t(r)]["rank"], 1);
    EXPECT_NEAR(records[size_t(r)]["factor"].get<double>(), 2.0, 1e-9);
    EXPECT_EQ(summaries[size_t(r)]["straggler"]["first_step"], 10);
    EXPECT_EQ(summaries[size_t(r)]["straggler"]["intervals"], 1);
  }
}

// A rank hovering at the factor is named once, not at every crossing: it is named anew only
// after `patience` intervals without a straggler.
TEST(StragglerWatch, NamesAHoveringRankOnceAndAgainOnlyAfterAQuietSpell) {
  auto store = std::make_shared<rendezvous::HashStore>();
  std::vector<std::vector<int64_t>> named_at(2);
  // Rank 1's compute per interval of 5 steps (rank 0: 10 ms): slow, slow (named at 10), just
  // under, slow, slow (still the same straggler: no line), fast, fast (a quiet spell), slow,
  // slow (named anew at 45).
  const std::vector<double> rank1 = {20, 20, 14, 20, 20, 10, 10, 20, 20};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto group = comm::make_process_group(comm::Communicator::create(store, r, 2));
      StragglerWatch w({.every = 5, .factor = 1.5, .patience = 2}, group);
      for (int64_t step = 1; step <= int64_t(5 * rank1.size()); ++step) {
        const double ms = r == 1 ? rank1[size_t((step - 1) / 5)] : 10;
        if (w.after_step(step, 1e-3 * ms)) named_at[size_t(r)].push_back(step);
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_EQ(named_at[size_t(r)], (std::vector<int64_t>{10, 45})) << r;
}

}  // namespace
}  // namespace cohort::train
