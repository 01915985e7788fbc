// metrics::Tracer (the trace-event JSON, the cap, the merge), the clock-offset estimator on
// synthetic round trips, and the module scopes behind per-module forward/backward spans.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "cohort/core/error.h"
#include "cohort/metrics/trace.h"
#include "cohort/nn/layers.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"

namespace {

namespace fs = std::filesystem;
using cohort::metrics::ClockRound;
using cohort::metrics::Tracer;
using nlohmann::json;

// The trace-event format's rules for the events a Tracer writes ("X" complete, "M" metadata,
// "i" instant): required fields and their types, non-negative times.
void expect_valid_event(const json& e) {
  ASSERT_TRUE(e.is_object()) << e;
  ASSERT_TRUE(e.contains("name") && e["name"].is_string()) << e;
  ASSERT_TRUE(e.contains("ph") && e["ph"].is_string()) << e;
  ASSERT_TRUE(e.contains("pid") && e["pid"].is_number_integer()) << e;
  ASSERT_TRUE(e.contains("tid") && e["tid"].is_number_integer()) << e;
  std::string ph = e["ph"];
  if (ph == "M") {
    EXPECT_TRUE(e["args"].is_object()) << e;
    return;
  }
  ASSERT_TRUE(ph == "X" || ph == "i") << e;
  ASSERT_TRUE(e.contains("ts") && e["ts"].is_number()) << e;
  EXPECT_GE(e["ts"].get<double>(), 0) << e;
  if (ph == "X") {
    ASSERT_TRUE(e.contains("cat") && e["cat"].is_string()) << e;
    ASSERT_TRUE(e.contains("dur") && e["dur"].is_number()) << e;
    EXPECT_GE(e["dur"].get<double>(), 0) << e;
  }
}

TEST(Tracer, WritesTheTraceEventFormat) {
  Tracer t({.rank = 3});
  auto t0 = Tracer::Clock::now();
  t.complete("forward", "step", t0, t0 + std::chrono::microseconds(1500), "main", {{"step", 1}});
  t.complete("allreduce bucket 0", "comm", t0 + std::chrono::microseconds(200),
             t0 + std::chrono::microseconds(900), "comm");
  t.complete("backwards in time", "step", t0, t0 - std::chrono::microseconds(5));
  { cohort::metrics::Span span(&t, "optimizer", "step"); }
  { cohort::metrics::Span off(nullptr, "nothing", "step"); }  // tracing off: records nothing
  json j = t.to_json();
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::set<std::string> threads;
  bool process_named = false;
  int complete = 0;
  for (const json& e : j["traceEvents"]) {
    expect_valid_event(e);
    EXPECT_EQ(e["pid"], 3);
    if (e["ph"] == "M" && e["name"] == "process_name")
      process_named = e["args"]["name"] == "rank 3";
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.insert(e["args"]["name"]);
    if (e["ph"] == "X") ++complete;
  }
  EXPECT_TRUE(process_named);
  EXPECT_EQ(threads, (std::set<std::string>{"main", "comm"}));
  EXPECT_EQ(complete, 4);
  EXPECT_EQ(j["traceEvents"][4]["dur"], 1500);  // after 2 process + 2 thread metadata events
  EXPECT_EQ(j["traceEvents"][4]["args"]["step"], 1);
  EXPECT_EQ(j["otherData"]["events_dropped"], 0);
}

TEST(Tracer, ShiftsByTheClockOffset) {
  Tracer t({.rank = 1});
  auto t0 = Tracer::Clock::now();
  t.complete("a", "step", t0, t0);
  t.set_clock_offset({.offset_us = 250.5, .uncertainty_us = 12, .rounds = 8});
  json j = t.to_json();
  const json& x = j["traceEvents"].back();
  EXPECT_NEAR(x["ts"].get<double>(), Tracer::to_us(t0) + 250.5, 1e-3);
  EXPECT_EQ(j["otherData"]["clock_offset_us"], 250.5);
  EXPECT_EQ(j["otherData"]["clock_uncertainty_us"], 12);
}

TEST(Tracer, CapsEventsAndSaysSo) {
  Tracer t({.rank = 0, .max_events = 3});
  auto t0 = Tracer::Clock::now();
  for (int i = 0; i < 10; ++i) t.complete("s", "step", t0, t0);
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.dropped(), 7u);
  json j = t.to_json();
  EXPECT_EQ(j["otherData"]["events_dropped"], 7);
  const json& last = j["traceEvents"].back();
  expect_valid_event(last);
  EXPECT_EQ(last["ph"], "i");
  EXPECT_EQ(last["args"]["dropped"], 7);
}

TEST(Tracer, MergesRankFilesAndNamesMissingOnes) {
  fs::path dir = fs::temp_directory_path() / ("cohort_trace_unit_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<std::string> files;
  for (int r = 0; r < 3; ++r) files.push_back((dir / ("trace.rank" + std::to_string(r))).string());
  for (int r = 0; r < 2; ++r) {  // rank 2 wrote nothing (its run dir is on another node)
    Tracer t({.rank = r});
    auto t0 = Tracer::Clock::now();
    t.complete("step", "step", t0, t0);
    t.write(files[size_t(r)]);
  }
  EXPECT_EQ(cohort::metrics::merge_traces(files, (dir / "trace.json").string()), 2);
  std::ifstream in(dir / "trace.json");
  json j = json::parse(in);
  std::set<int> pids;
  for (const json& e : j["traceEvents"]) {
    expect_valid_event(e);
    pids.insert(e["pid"].get<int>());
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_EQ(j["otherData"]["ranks"].size(), 2u);
  EXPECT_EQ(j["otherData"]["missing_rank_files"], json::array({files[2]}));
  fs::remove_all(dir);
}

TEST(ClockOffset, TakesTheRoundWithTheSmallestRoundTrip) {
  // The reference clock is 1000 us ahead; rounds answered off-centre by network asymmetry.
  std::vector<ClockRound> rounds = {
      {.sent_us = 0, .reference_us = 1090, .received_us = 100},    // rtt 100, midpoint 50
      {.sent_us = 200, .reference_us = 1212, .received_us = 220},  // rtt 20: the best
      {.sent_us = 300, .reference_us = 1300, .received_us = 360},  // rtt 60
  };
  auto o = cohort::metrics::estimate_offset(rounds);
  EXPECT_DOUBLE_EQ(o.offset_us, 1212 - 210);
  EXPECT_DOUBLE_EQ(o.uncertainty_us, 10);
  EXPECT_EQ(o.rounds, 3);
  EXPECT_LE(std::abs(o.offset_us - 1000), o.uncertainty_us);  // the truth lies in the bound
}

TEST(ClockOffset, RejectsNoRoundsAndTimeRunningBackwards) {
  EXPECT_THROW(cohort::metrics::estimate_offset({}), cohort::InvalidArgument);
  EXPECT_THROW(
      cohort::metrics::estimate_offset({{.sent_us = 10, .reference_us = 0, .received_us = 5}}),
      cohort::InvalidArgument);
}

// Records begin/end as "+name"/"-name" per pass.
struct Recording : cohort::autograd::ScopeObserver {
  std::vector<std::string> forward, backward;
  void begin(const cohort::autograd::Scope& s, cohort::autograd::Pass p) override {
    (p == cohort::autograd::Pass::forward ? forward : backward).push_back("+" + s.name);
  }
  void end(const cohort::autograd::Scope& s, cohort::autograd::Pass p) override {
    (p == cohort::autograd::Pass::forward ? forward : backward).push_back("-" + s.name);
  }
};

TEST(ModuleScopes, ReportForwardAndBackwardPerLayerInOrder) {
  cohort::nn::MLP mlp({4, 3, 2});  // layers.0, relu (untraced glue), layers.1
  auto rec = std::make_shared<Recording>();
  for (auto& [name, m] : mlp.named_modules()) {
    if (name.rfind("layers.", 0) == 0)
      m->set_trace_scope(
          std::make_shared<cohort::autograd::Scope>(cohort::autograd::Scope{name, nullptr, rec}));
  }
  cohort::Tensor x = cohort::ones({5, 4});
  cohort::Tensor y = cohort::from_vector_i64({0, 1, 0, 1, 0}, {5});
  cohort::Tensor loss = cohort::nn::cross_entropy(mlp(x), y);
  loss.backward();
  using V = std::vector<std::string>;
  EXPECT_EQ(rec->forward, (V{"+layers.0", "-layers.0", "+layers.1", "-layers.1"}));
  EXPECT_EQ(rec->backward, (V{"+layers.1", "-layers.1", "+layers.0", "-layers.0"}));
  EXPECT_EQ(cohort::autograd::current_scope(), nullptr);  // nothing left behind
}

TEST(ModuleScopes, NestAsTheCallsRan) {
  using cohort::nn::Linear;
  using cohort::nn::Sequential;
  auto inner = std::make_shared<Sequential>(std::vector<std::shared_ptr<cohort::nn::Module>>{
      std::make_shared<Linear>(4, 3), std::make_shared<Linear>(3, 2)});
  Sequential root(std::vector<std::shared_ptr<cohort::nn::Module>>{inner});
  auto rec = std::make_shared<Recording>();
  for (auto& [name, m] : root.named_modules()) {
    if (!name.empty())
      m->set_trace_scope(
          std::make_shared<cohort::autograd::Scope>(cohort::autograd::Scope{name, nullptr, rec}));
  }
  cohort::Tensor y = cohort::from_vector_i64({0, 1}, {2});
  cohort::nn::cross_entropy(root(cohort::ones({2, 4})), y).backward();
  using V = std::vector<std::string>;
  EXPECT_EQ(rec->forward, (V{"+0", "+0.0", "-0.0", "+0.1", "-0.1", "-0"}));
  EXPECT_EQ(rec->backward, (V{"+0", "+0.1", "-0.1", "+0.0", "-0.0", "-0"}));
}

}  // namespace
