// `cohort dashboard RUN_DIR...`: two tiny `cohort train` runs (2 workers and 1, different
// learning rates) served as past runs. /api/state holds both runs with the curves their JSONL
// files hold; headless Chromium renders the page with both runs listed, the overlaid charts
// drawing points, and the selected run's ranks at their last step records; SIGTERM ends it with
// status 0. Off loopback the token is required; a missing directory, or one without metrics,
// is a usage error (status 2) naming it. The browser checks are skipped, with the reason, where
// chromium-headless-shell is not installed.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/e2e/background_job.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using cohort::testing::BackgroundJob;
using cohort::testing::run_cli;

// Two finished runs, trained once for the whole suite: <root>/a (2 workers) and <root>/b.
struct Runs {
  fs::path root, a, b;
};

const Runs& trained_runs() {
  static const Runs runs = [] {
    Runs r;
    r.root = cohort::testing::fresh_dir("cohort_pastdash_", "runs");
    r.a = r.root / "a";
    r.b = r.root / "b";
    const std::string common =
        " --set data.dataset=synthetic --set data.synthetic_samples=4096 --set data.batch_size=32"
        " --set run.threads=1 --set run.log_every=5 --set train.eval_every=10"
        " --set train.max_steps=40 --set run.progress=none --set run.dir=" +
        r.root.string();
    auto a = run_cli("train /dev/null --workers 2 --set run.name=a" + common);
    EXPECT_EQ(a.status, 0) << a.output;
    auto b = run_cli("train /dev/null --set optim.lr=0.2 --set run.name=b" + common);
    EXPECT_EQ(b.status, 0) << b.output;
    return r;
  }();
  return runs;
}

// Every record of `event` in a metrics file, in file order.
std::vector<json> records_of(const fs::path& jsonl, const std::string& event) {
  std::ifstream in(jsonl);
  std::vector<json> out;
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    if (j.value("event", "") == event) out.push_back(j);
  }
  return out;
}

// GET `path_and_query` from the address `url` printed; the status, and the body in *body.
int get(const std::string& url, const std::string& path_and_query, std::string* body = nullptr) {
  const std::smatch m = [&] {
    std::smatch mm;
    std::regex_search(url, mm, std::regex(R"(http://([0-9.]+):(\d+)/)"));
    return mm;
  }();
  httplib::Client c(m[1].str(), std::stoi(m[2].str()));
  auto res = c.Get(path_and_query);
  if (body && res) *body = res->body;
  return res ? res->status : -1;
}

// The value of data-<attr> on the element with data-run="RUN" data-field="FIELD".
std::string run_cell(const std::string& dom, int run, const std::string& field) {
  std::smatch m;
  const std::regex re("data-run=\"" + std::to_string(run) + "\" data-field=\"" + field +
                      "\" data-value=\"([^\"]*)\"");
  return std::regex_search(dom, m, re) ? m[1].str() : "(absent)";
}

// Points per dataset the chart on canvas `id` draws ("8,8"), or "(absent)".
std::string chart_points(const std::string& dom, const std::string& id) {
  std::smatch m;
  const std::regex re("id=\"" + id + "\"[^>]*data-points=\"([^\"]*)\"");
  return std::regex_search(dom, m, re) ? m[1].str() : "(absent)";
}

TEST(PastRunsDashboard, ServesBothRunsCurvesAsTheirFilesHoldThem) {
  const Runs& r = trained_runs();
  const fs::path out = r.root / "served.txt";
  BackgroundJob job("dashboard " + r.a.string() + " " + r.b.string(), out);
  const std::string url = job.wait_for_url();
  ASSERT_FALSE(url.empty()) << job.output();
  std::string body;
  ASSERT_EQ(get(url, "/api/state", &body), 200);
  const json s = json::parse(body);
  ASSERT_EQ(s["mode"], "runs");
  ASSERT_EQ(s["runs"].size(), 2u);
  EXPECT_EQ(s["runs"][0]["name"], "a");
  EXPECT_EQ(s["runs"][1]["name"], "b");
  EXPECT_EQ(s["runs"][0]["config"]["optim.lr"], "0.05");  // what differs between them
  EXPECT_EQ(s["runs"][1]["config"]["optim.lr"], "0.2");
  for (int i = 0; i < 2; ++i) {
    const json& st = s["runs"][i]["state"];
    const fs::path dir = i == 0 ? r.a : r.b;
    EXPECT_EQ(st["state"], "finished");
    EXPECT_EQ(st["workers"], i == 0 ? 2 : 1);
    json loss = json::array();
    for (const json& step : records_of(dir / "metrics.jsonl", "step"))
      loss.push_back(json::array({step["step"], step["loss"]}));
    EXPECT_EQ(st["loss"], loss) << "run " << i;
    EXPECT_EQ(st["evals"].size(), records_of(dir / "metrics.jsonl", "eval").size());
    EXPECT_GE(st["evals"].size(), 4u);
  }
  ASSERT_EQ(get(url, "/api/state?run=b", &body), 200);
  EXPECT_EQ(json::parse(body)["loss"], s["runs"][1]["state"]["loss"]);
  EXPECT_EQ(job.stop(SIGTERM), 0) << job.output();
  EXPECT_NE(job.output().find("dashboard stopped (SIGTERM)"), std::string::npos);
}

TEST(PastRunsDashboard, TheBrowserListsBothRunsAndDrawsTheirCurves) {
  if (!fs::exists(cohort::testing::kBrowser))
    GTEST_SKIP() << cohort::testing::kBrowser << " not installed (chromium-headless-shell)";
  const Runs& r = trained_runs();
  BackgroundJob job("dashboard " + r.a.string() + " " + r.b.string(), r.root / "browser.txt");
  const std::string url = job.wait_for_url();
  ASSERT_FALSE(url.empty()) << job.output();
  const std::string dom = cohort::testing::dump_dom(url);
  EXPECT_EQ(run_cell(dom, 0, "name"), "a");
  EXPECT_EQ(run_cell(dom, 1, "name"), "b");
  EXPECT_EQ(run_cell(dom, 0, "workers"), "2");
  EXPECT_EQ(run_cell(dom, 1, "state"), "finished");
  const size_t steps = records_of(r.a / "metrics.jsonl", "step").size();
  const std::string both = std::to_string(steps) + "," + std::to_string(steps);
  // The charts draw only with Debian's Chart.js (libjs-chart.js); without it the page says so.
  if (fs::exists("/usr/share/javascript/chart.js/chart.min.js")) {
    EXPECT_EQ(chart_points(dom, "c-cmp-loss"), both) << "the overlaid loss curves";
    EXPECT_EQ(chart_points(dom, "c-cmp-tput"), both);
    EXPECT_NE(chart_points(dom, "c-cmp-acc"), "(absent)");
  }
  // Below, the first run as the live page shows a job: both ranks at their last step records.
  for (int rank = 0; rank < 2; ++rank) {
    const json last = cohort::testing::last_record(
        r.a / (rank == 0 ? "metrics.jsonl" : "metrics.rank1.jsonl"), "step");
    std::smatch m;
    const std::regex cell("data-rank=\"" + std::to_string(rank) +
                          "\" data-field=\"step\" data-value=\"(\\d+)\"");
    ASSERT_TRUE(std::regex_search(dom, m, cell)) << "rank " << rank << " is not shown";
    EXPECT_EQ(std::stoll(m[1]), last["step"].get<int64_t>());
  }
  // The run in the address's #run= is the one shown: b has one rank.
  const std::string dom_b = cohort::testing::dump_dom(url + "#run=b");
  EXPECT_NE(dom_b.find("data-rank=\"0\""), std::string::npos);
  EXPECT_EQ(dom_b.find("data-rank=\"1\""), std::string::npos);
  const fs::path png = r.root / "past_runs.png";
  cohort::testing::screenshot(url, png, 1500);
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 20000u) << "a blank page?";
  EXPECT_EQ(job.stop(SIGINT), 0) << job.output();
}

TEST(PastRunsDashboard, OffLoopbackTheTokenIsRequired) {
  const Runs& r = trained_runs();
  BackgroundJob job("dashboard " + r.b.string() + " --bind 0.0.0.0 --port 0", r.root / "bind.txt");
  const std::string url = job.wait_for(R"(dashboard at (http://\S+))");
  ASSERT_FALSE(url.empty()) << job.output();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(url, m, std::regex(R"(\?token=([0-9a-f]+))"))) << url;
  const std::string token = m[1];
  EXPECT_EQ(get(url, "/api/state"), 401);
  EXPECT_EQ(get(url, "/"), 401);
  EXPECT_EQ(get(url, "/api/state?token=" + std::string(token.size(), '0')), 401);
  EXPECT_EQ(get(url, "/api/state?token=" + token), 200);
  EXPECT_EQ(get(url, "/?token=" + token), 200);
  EXPECT_EQ(job.stop(SIGTERM), 0) << job.output();
}

TEST(PastRunsDashboard, AMissingDirectoryOrOneWithoutMetricsIsAUsageErrorNamingIt) {
  const Runs& r = trained_runs();
  const fs::path missing = r.root / "nope";
  auto res = run_cli("dashboard " + r.a.string() + " " + missing.string());
  EXPECT_EQ(res.status, 2) << res.output;
  EXPECT_TRUE(cohort::testing::contains(res, "run directory '" + missing.string() + "'"))
      << res.output;
  const fs::path empty = r.root / "empty";
  fs::create_directories(empty);
  res = run_cli("dashboard " + empty.string());
  EXPECT_EQ(res.status, 2) << res.output;
  EXPECT_TRUE(cohort::testing::contains(res, "'" + empty.string() + "' has no metrics.jsonl"))
      << res.output;
  cohort::testing::write_bytes(empty / "metrics.jsonl", "");
  res = run_cli("dashboard " + empty.string());
  EXPECT_EQ(res.status, 2) << res.output;
  EXPECT_TRUE(cohort::testing::contains(res, "holds no metrics")) << res.output;
  res = run_cli("dashboard " + r.a.string() + " --port 70000");
  EXPECT_EQ(res.status, 2) << res.output;
  res = run_cli("dashboard");
  EXPECT_EQ(res.status, 2) << res.output;
}

TEST(PastRunsDashboard, PrintStateWritesTheJsonAndServesNothing) {
  const Runs& r = trained_runs();
  auto res = run_cli("dashboard " + r.a.string() + " " + r.b.string() + " --print-state");
  ASSERT_EQ(res.status, 0) << res.output;
  const json s = json::parse(res.output);
  EXPECT_EQ(s["runs"].size(), 2u);
  EXPECT_EQ(s["runs"][0]["state"]["ranks"].size(), 2u);
  EXPECT_EQ(res.output.find("dashboard at"), std::string::npos);
}

}  // namespace
