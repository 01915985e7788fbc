// The dashboard of past runs over HTTP: every run in /api/state, one by name, the live page,
// and the live dashboard's rule: off loopback, nothing without the token.
#include "cohort/monitor/runs_dashboard.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include "cohort/core/error.h"
#include "cohort/monitor/replay.h"

namespace {

using cohort::monitor::PastRun;
using cohort::monitor::RunsDashboard;
using cohort::net::Secret;
using Json = nlohmann::json;

PastRun run_named(const std::string& name, double loss) {
  cohort::monitor::RecordedRun rec;
  rec.ranks[0] = {Json{{"event", "start"}, {"model", "mlp"}, {"total_steps", 2}},
                  Json{{"event", "step"}, {"step", 1}, {"loss", loss}, {"time_s", 0.5}},
                  Json{{"event", "step"}, {"step", 2}, {"loss", loss / 2}, {"time_s", 1.0}},
                  Json{{"event", "summary"}, {"wall_seconds", 1.5}}};
  return PastRun{.name = name,
                 .dir = "runs/" + name,
                 .info = Json{{"strategy", "ddp"}},
                 .view = cohort::monitor::replay(rec, {.workers = 1})};
}

std::vector<PastRun> two_runs() {
  std::vector<PastRun> runs;
  runs.push_back(run_named("a", 2.0));
  runs.push_back(run_named("b", 4.0));
  return runs;
}

std::string fetch(const RunsDashboard& d, const std::string& path, int* status = nullptr) {
  httplib::Client c("127.0.0.1", d.port());
  auto res = c.Get(path);
  if (status) *status = res ? res->status : -1;
  return res ? res->body : "";
}

TEST(RunsDashboard, ServesEveryRunAndOneByName) {
  RunsDashboard d({.secret = Secret::generate()}, two_runs());
  Json s = Json::parse(fetch(d, "/api/state"));
  EXPECT_EQ(s["mode"], "runs");
  ASSERT_EQ(s["runs"].size(), 2u);
  EXPECT_EQ(s["runs"][0]["name"], "a");
  EXPECT_EQ(s["runs"][1]["dir"], "runs/b");
  EXPECT_EQ(s["runs"][1]["strategy"], "ddp");
  EXPECT_EQ(s["runs"][1]["state"]["loss"], Json::parse("[[1, 4.0], [2, 2.0]]"));
  EXPECT_EQ(s["runs"][0]["state"]["state"], "finished");
  // One run alone has the live /api/state's shape.
  Json b = Json::parse(fetch(d, "/api/state?run=b"));
  EXPECT_EQ(b["loss"], s["runs"][1]["state"]["loss"]);
  int status = 0;
  fetch(d, "/api/state?run=zzz", &status);
  EXPECT_EQ(status, 404);
  EXPECT_NE(fetch(d, "/").find("cohort dashboard"), std::string::npos);
  EXPECT_FALSE(fetch(d, "/chart.js").empty());
  EXPECT_EQ(d.url(), "http://127.0.0.1:" + std::to_string(d.port()) + "/");
}

TEST(RunsDashboard, OffLoopbackEveryRequestNeedsTheToken) {
  const Secret secret = Secret::generate();
  RunsDashboard d({.bind = "0.0.0.0", .secret = secret}, two_runs());
  const std::string token = secret.derive("dashboard").to_hex();
  EXPECT_NE(d.url().find("?token=" + token), std::string::npos) << d.url();
  EXPECT_EQ(d.url().find(secret.to_hex()), std::string::npos);
  for (const char* path : {"/", "/api/state", "/chart.js"}) {
    int status = 0;
    fetch(d, path, &status);
    EXPECT_EQ(status, 401) << path;
    fetch(d, std::string(path) + "?token=" + secret.to_hex(), &status);  // the secret is not it
    EXPECT_EQ(status, 401) << path;
    fetch(d, std::string(path) + "?token=" + token, &status);
    EXPECT_EQ(status, 200) << path;
  }
}

TEST(RunsDashboard, NeedsRunsWithDistinctNamesAndASecret) {
  EXPECT_THROW(RunsDashboard({.secret = Secret::generate()}, {}), cohort::InvalidArgument);
  std::vector<PastRun> same;
  same.push_back(run_named("a", 1));
  same.push_back(run_named("a", 2));
  EXPECT_THROW(RunsDashboard({.secret = Secret::generate()}, std::move(same)),
               cohort::InvalidArgument);
  EXPECT_THROW(RunsDashboard({}, two_runs()), cohort::InvalidArgument);
}

}  // namespace
