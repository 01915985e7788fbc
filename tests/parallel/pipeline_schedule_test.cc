// Pipeline schedules: per-stage order, and a simulation of every stage's communication plan
// together that proves the stages agree on every message and never deadlock.
#include "cohort/parallel/pipeline/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cohort/core/error.h"

namespace cohort::parallel {
namespace {

using Kind = PipelineAction::Kind;

struct Case {
  PipelineSchedule schedule;
  int p, m, v;
};

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, 4, 8, 16}) {
      out.push_back({PipelineSchedule::kGPipe, p, m, 1});
      out.push_back({PipelineSchedule::k1F1B, p, m, 1});
      for (int v : {1, 2, 3})
        if (m % p == 0) out.push_back({PipelineSchedule::kInterleaved1F1B, p, m, v});
    }
  return out;
}

std::string name(const Case& c) {
  return detail::str(pipeline_schedule_name(c.schedule), " p=", c.p, " m=", c.m, " v=", c.v);
}

// Rendezvous model (no transport buffering, the worst case): a message is delivered only while
// the sender's and the receiver's current batches both hold it; a batch completes when all its
// messages are delivered. Returns "" or what went wrong.
std::string simulate(const Case& c) {
  std::vector<std::vector<std::vector<PipelineTransfer>>> plans;
  for (int s = 0; s < c.p; ++s) {
    auto actions = make_pipeline_schedule(c.schedule, c.p, s, c.m, c.v);
    plans.push_back(make_pipeline_comm_plan(actions, c.p, s, c.v));
  }
  std::vector<size_t> at(size_t(c.p), 0);
  std::vector<std::vector<bool>> done(size_t(c.p));
  auto reset = [&](int s) {
    if (at[size_t(s)] < plans[size_t(s)].size())
      done[size_t(s)].assign(plans[size_t(s)][at[size_t(s)]].size(), false);
  };
  for (int s = 0; s < c.p; ++s) reset(s);
  for (;;) {
    bool progress = false, finished = true;
    for (int a = 0; a < c.p; ++a) {
      if (at[size_t(a)] >= plans[size_t(a)].size()) continue;
      finished = false;
      auto& batch = plans[size_t(a)][at[size_t(a)]];
      for (size_t i = 0; i < batch.size(); ++i) {
        const auto& t = batch[i];
        if (done[size_t(a)][i] || t.kind != PipelineTransfer::kSend) continue;
        int b = t.peer;
        if (at[size_t(b)] >= plans[size_t(b)].size()) return "send to a finished stage";
        auto& other = plans[size_t(b)][at[size_t(b)]];
        for (size_t j = 0; j < other.size(); ++j) {
          const auto& r = other[j];
          if (done[size_t(b)][j] || r.kind != PipelineTransfer::kRecv || r.peer != a) continue;
          int send_vs = t.chunk * c.p + a, recv_vs = r.chunk * c.p + b;
          int want_vs = t.gradient ? send_vs - 1 : send_vs + 1;
          if (r.gradient != t.gradient || r.micro != t.micro || recv_vs != want_vs) {
            return detail::str("message mismatch ", a, "->", b, " micro ", t.micro, "/", r.micro);
          }
          done[size_t(a)][i] = done[size_t(b)][j] = true;
          progress = true;
          break;
        }
      }
    }
    for (int s = 0; s < c.p; ++s) {
      if (at[size_t(s)] >= plans[size_t(s)].size()) continue;
      auto& d = done[size_t(s)];
      if (std::all_of(d.begin(), d.end(), [](bool x) { return x; })) {
        ++at[size_t(s)];
        reset(s);
        progress = true;
      }
    }
    if (finished) return "";
    if (!progress) return "deadlock";
  }
}

TEST(PipelineSchedule, EveryCaseIsConsistentAndDeadlockFree) {
  for (const auto& c : all_cases()) EXPECT_EQ(simulate(c), "") << name(c);
}

// Interleaved with m == p runs every forward first (Megatron): the last forward and the first
// backward must not form one unit, or neighbours wait on each other's gradient (this was a
// deadlock when sends do not buffer).
TEST(PipelineSchedule, InterleavedWithMEqualPIsDeadlockFree) {
  EXPECT_EQ(simulate({PipelineSchedule::kInterleaved1F1B, 2, 2, 2}), "");
  EXPECT_EQ(simulate({PipelineSchedule::kInterleaved1F1B, 4, 4, 2}), "");
  EXPECT_EQ(simulate({PipelineSchedule::kInterleaved1F1B, 8, 8, 3}), "");
  EXPECT_EQ(simulate({PipelineSchedule::kInterleaved1F1B, 2, 4, 2}), "");
}

TEST(PipelineSchedule, EachMicroRunsForwardThenBackwardOnce) {
  for (const auto& c : all_cases())
    for (int s = 0; s < c.p; ++s) {
      auto actions = make_pipeline_schedule(c.schedule, c.p, s, c.m, c.v);
      std::set<std::pair<int, int>> fwd, bwd;
      for (const auto& a : actions) {
        auto key = std::make_pair(a.micro, a.chunk);
        if (a.kind == Kind::kForward) {
          EXPECT_TRUE(fwd.insert(key).second) << name(c);
        } else {
          EXPECT_TRUE(fwd.count(key)) << name(c) << " backward before forward";
          EXPECT_TRUE(bwd.insert(key).second) << name(c);
        }
      }
      EXPECT_EQ(fwd.size(), size_t(c.m * c.v)) << name(c);
      EXPECT_EQ(bwd.size(), size_t(c.m * c.v)) << name(c);
    }
}

TEST(PipelineSchedule, GPipeRunsAllForwardsThenBackwardsInOrder) {
  auto a = make_pipeline_schedule(PipelineSchedule::kGPipe, 4, 2, 3);
  ASSERT_EQ(a.size(), 6u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(a[size_t(k)].kind, Kind::kForward);
    EXPECT_EQ(a[size_t(k)].micro, k);
    EXPECT_EQ(a[size_t(k + 3)].kind, Kind::kBackward);
    EXPECT_EQ(a[size_t(k + 3)].micro, k);
  }
}

TEST(PipelineSchedule, OneFOneBKeepsAtMostPMinusStageInFlight) {
  for (int p : {1, 2, 4, 8})
    for (int m : {1, 3, 4, 8, 16})
      for (int s = 0; s < p; ++s) {
        int in_flight = 0, peak = 0;
        for (const auto& a : make_pipeline_schedule(PipelineSchedule::k1F1B, p, s, m)) {
          in_flight += a.kind == Kind::kForward ? 1 : -1;
          peak = std::max(peak, in_flight);
        }
        EXPECT_LE(peak, p - s) << "p=" << p << " m=" << m << " s=" << s;
        EXPECT_EQ(peak, std::min(p - s, m));
      }
}

TEST(PipelineSchedule, OneFOneBWarmUp) {
  auto a = make_pipeline_schedule(PipelineSchedule::k1F1B, 4, 1, 8);
  // warm-up of 2 forwards, then F2 B0 F3 B1 ...
  EXPECT_EQ(a[0].kind, Kind::kForward);
  EXPECT_EQ(a[1].kind, Kind::kForward);
  EXPECT_EQ(a[2].kind, Kind::kForward);
  EXPECT_EQ(a[2].micro, 2);
  EXPECT_EQ(a[3].kind, Kind::kBackward);
  EXPECT_EQ(a[3].micro, 0);
  auto last = make_pipeline_schedule(PipelineSchedule::k1F1B, 4, 3, 2);
  EXPECT_EQ(last[1].kind, Kind::kBackward);  // the last stage has no warm-up
}

// Timing simulation with forward 1, backward 2 (per chunk) and free communication: the idle
// fraction of the step is the formula, (p - 1) / (v m + p - 1) (what bench/pipeline_bubble
// measures with real threads).
TEST(PipelineSchedule, SimulatedBubbleMatchesFormula) {
  std::vector<Case> cases;
  for (int p : {2, 3, 4})
    for (int m : {1, 2, 3, 4, 6, 8}) {
      cases.push_back({PipelineSchedule::kGPipe, p, m, 1});
      cases.push_back({PipelineSchedule::k1F1B, p, m, 1});
      for (int v : {2, 3})
        if (m % p == 0) cases.push_back({PipelineSchedule::kInterleaved1F1B, p, m, v});
    }
  for (const auto& c : cases) {
    const int p = c.p, m = c.m, v = c.v;
    std::vector<std::vector<PipelineAction>> acts;
    for (int s = 0; s < p; ++s) acts.push_back(make_pipeline_schedule(c.schedule, p, s, m, v));
    std::map<std::tuple<int, int, int>, double> end;  // (kind, micro, virtual stage) -> time
    std::vector<size_t> next(size_t(p), 0);
    std::vector<double> clock(size_t(p), 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (int s = 0; s < p; ++s) {
        if (next[size_t(s)] >= acts[size_t(s)].size()) continue;
        auto a = acts[size_t(s)][next[size_t(s)]];
        double ready = 0;
        bool fwd = a.kind == Kind::kForward;
        const int vs = a.chunk * p + s, from = fwd ? vs - 1 : vs + 1;
        if (from >= 0 && from < p * v) {
          auto it = end.find({int(a.kind), a.micro, from});
          if (it == end.end()) continue;
          ready = it->second;
        }
        double start = std::max(ready, clock[size_t(s)]);
        clock[size_t(s)] = start + (fwd ? 1 : 2);
        end[{int(a.kind), a.micro, vs}] = clock[size_t(s)];
        ++next[size_t(s)];
        progress = true;
      }
    }
    for (int s = 0; s < p; ++s) ASSERT_EQ(next[size_t(s)], acts[size_t(s)].size()) << name(c);
    double total = *std::max_element(clock.begin(), clock.end());
    double bubble = 1 - 3.0 * m * v / total;
    EXPECT_NEAR(bubble, pipeline_bubble_formula(c.schedule, p, m, v), 1e-12) << name(c);
  }
}

TEST(PipelineSchedule, Errors) {
  auto msg = [](auto fn) {
    try {
      fn();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([] { parse_pipeline_schedule("pipedream"); }).find("pipeline.schedule"),
            std::string::npos);
  EXPECT_NE(msg([] { parse_pipeline_schedule("pipedream"); }).find("pipedream"), std::string::npos);
  EXPECT_EQ(parse_pipeline_schedule("1f1b"), PipelineSchedule::k1F1B);
  EXPECT_NE(msg([] { make_pipeline_schedule(PipelineSchedule::kGPipe, 0, 0, 1); }).find("got 0"),
            std::string::npos);
  EXPECT_NE(msg([] { make_pipeline_schedule(PipelineSchedule::kGPipe, 2, 2, 1); }).find("got 2"),
            std::string::npos);
  EXPECT_NE(msg([] {
              make_pipeline_schedule(PipelineSchedule::k1F1B, 2, 0, 0);
            }).find("micro_batches must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(msg([] {
              make_pipeline_schedule(PipelineSchedule::kInterleaved1F1B, 4, 0, 6, 2);
            }).find("multiple"),
            std::string::npos);
  EXPECT_NE(
      msg([] { make_pipeline_schedule(PipelineSchedule::k1F1B, 2, 0, 4, 2); }).find("chunks = 2"),
      std::string::npos);
}

}  // namespace
}  // namespace cohort::parallel
