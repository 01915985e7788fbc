// Straggler detection's judgement (train/straggler.h), without processes: a rank slower than
// the median of the others by the factor for `patience` intervals in a row is named, the
// slowest first; a fast interval resets its streak; even slowness names nobody.
#include <gtest/gtest.h>

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
            "straggler: rank 1 mean step 21.0 ms, 2.1x the median of the others (10.0 ms), "
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

}  // namespace
}  // namespace cohort::train
