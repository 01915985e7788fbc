// run.trace end to end: a 2-worker DDP run of the real binary writes runs/<name>/trace.json with
// both ranks, the step's spans for every step, per-module spans, and each rank's allreduce
// spans inside that rank's backward of the same step (DDP overlaps them with backward).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Span {
  double start = 0, end = 0;
};

// pid -> step -> the span named `name` of that step (category "step").
std::map<int, std::map<int64_t, Span>> step_spans(const json& events, const std::string& name) {
  std::map<int, std::map<int64_t, Span>> out;
  for (const json& e : events) {
    if (e["ph"] != "X" || e["cat"] != "step" || e["name"] != name) continue;
    double ts = e["ts"];
    out[e["pid"].get<int>()][e["args"]["step"].get<int64_t>()] = {ts, ts + e["dur"].get<double>()};
  }
  return out;
}

TEST(TraceE2E, TwoWorkerDdpRunWritesAMergedTimeline) {
  fs::path d = cohort::testing::fresh_dir("cohort_trace_e2e_", "ddp");
  auto r = cohort::testing::run_cli(
      "train /dev/null --workers 2 --set data.dataset=synthetic --set data.synthetic_samples=512"
      " --set data.batch_size=32 --set run.threads=1 --set run.progress=none"
      " --set comm.timeout_s=30 --set run.trace=true --set ddp.first_bucket_mb=0.05"
      " --set ddp.bucket_mb=0.2 --set run.dir=" +
      d.string() + " --set run.name=t");
  ASSERT_EQ(r.status, 0) << r.output;
  fs::path run = d / "t";
  ASSERT_TRUE(fs::exists(run / "trace.rank0.json") && fs::exists(run / "trace.rank1.json"));
  std::ifstream in(run / "trace.json");
  json trace = json::parse(in);  // throws (fails the test) if it is not JSON
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  const json& events = trace["traceEvents"];
  ASSERT_TRUE(events.is_array());
  EXPECT_TRUE(trace["otherData"]["missing_rank_files"].empty());

  std::set<int> pids;
  std::set<std::string> module_spans;
  for (const json& e : events) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name"));
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "X") {
      EXPECT_GE(e["dur"].get<double>(), 0);
      if (e["cat"] == "module") module_spans.insert(e["name"].get<std::string>());
    }
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  for (const char* m :
       {"forward layers.0", "backward layers.0", "forward layers.2", "backward layers.2"})
    EXPECT_TRUE(module_spans.count(m)) << m;

  auto forward = step_spans(events, "forward");
  auto backward = step_spans(events, "backward");
  auto optimizer = step_spans(events, "optimizer");
  const int64_t steps = 512 / 32 / 2;  // one epoch, two workers
  for (int pid : {0, 1}) {
    for (int64_t s = 1; s <= steps; ++s) {
      EXPECT_TRUE(forward[pid].count(s)) << "rank " << pid << " step " << s;
      EXPECT_TRUE(backward[pid].count(s)) << "rank " << pid << " step " << s;
      EXPECT_TRUE(optimizer[pid].count(s)) << "rank " << pid << " step " << s;
    }
  }

  // Every bucket's allreduce lies inside its rank's backward of the same step.
  std::map<int, int> allreduces;
  constexpr double kRoundingUs = 0.01;  // ts and dur are each rounded to the nanosecond
  for (const json& e : events) {
    if (e["ph"] != "X" || e["cat"] != "comm") continue;
    int pid = e["pid"];
    int64_t step = e["args"]["step"];
    ASSERT_TRUE(backward[pid].count(step)) << e;
    const Span& b = backward[pid][step];
    double ts = e["ts"], end = ts + e["dur"].get<double>();
    EXPECT_GE(ts, b.start - kRoundingUs) << e;
    EXPECT_LE(end, b.end + kRoundingUs) << e;
    ++allreduces[pid];
  }
  // The MLP's 784x512 weight alone fills more than one 0.2 MiB bucket: several per step.
  for (int pid : {0, 1}) EXPECT_GE(allreduces[pid], 2 * steps) << "rank " << pid;
}

}  // namespace
