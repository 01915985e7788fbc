// The live dashboard in a real browser: `cohort train --workers 2 --dashboard` runs, headless
// Chromium (Debian's chromium-headless-shell) loads the page twice while the job trains, and
// the page must show both ranks, figures that move between the two reads, and exactly the
// values the ranks wrote to their JSONL files. A screenshot is saved. Skipped, with the
// reason, where the browser is not installed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "tests/e2e/background_job.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/files.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using cohort::testing::BackgroundJob;
using cohort::testing::dump_dom;
using cohort::testing::kBrowser;

// rank -> field -> the exact value the page shows (data-value attributes of the ranks table).
using Shown = std::map<int, std::map<std::string, std::string>>;
Shown shown_by_rank(const std::string& dom) {
  const std::regex cell(R"re(data-rank="(\d+)" data-field="(\w+)" data-value="([^"]*)")re");
  Shown out;
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), cell); it != std::sregex_iterator();
       ++it)
    out[std::stoi((*it)[1])][(*it)[2]] = (*it)[3];
  return out;
}

// The step record of `step` in a rank's JSONL file (null if none).
json step_record(const fs::path& run, int rank, int64_t step) {
  std::ifstream in(
      run / (rank == 0 ? "metrics.jsonl" : "metrics.rank" + std::to_string(rank) + ".jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == "step" && j.value("step", -1) == step) return j;
  }
  return json();
}

void expect_equals_jsonl(const Shown& shown, const fs::path& run) {
  for (const auto& [rank, f] : shown) {
    const int64_t step = std::stoll(f.at("step"));
    json r = step_record(run, rank, step);
    ASSERT_TRUE(r.is_object()) << "rank " << rank << " step " << step << " is not in its JSONL";
    for (const char* k : {"samples_per_s", "loss", "backward_ms", "exposed_comm_ms"})
      EXPECT_DOUBLE_EQ(std::stod(f.at(k)), r[k].get<double>())
          << "rank " << rank << " step " << step << " " << k;
  }
}

TEST(DashboardBrowser, ShowsBothRanksLiveWithTheJsonlFigures) {
  if (!fs::exists(kBrowser)) GTEST_SKIP() << kBrowser << " not installed (chromium-headless-shell)";
  fs::path dir = cohort::testing::fresh_dir("cohort_dash_", "browser");
  // Synthetic data, a record every 5 steps, about 40 s of steps unless stopped first.
  BackgroundJob job(
      "train /dev/null --workers 2 --dashboard --set data.dataset=synthetic"
      " --set data.synthetic_samples=4096 --set data.batch_size=32 --set run.threads=1"
      " --set run.log_every=5 --set train.epochs=400 --set train.time_limit_s=40"
      " --set run.progress=none --set comm.timeout_s=60 --set run.dir=" +
          dir.string() + " --set run.name=live",
      dir / "out.txt");
  const std::string url = job.wait_for_url();
  ASSERT_FALSE(url.empty()) << cohort::testing::read_bytes((dir / "out.txt").string());
  // Until both ranks reported a step (the table lists them from the start, at step 0).
  auto both_stepped = [](Shown& s) {
    return s.size() == 2 && s[0]["step"] != "0" && s[1]["step"] != "0";
  };
  Shown first, second;
  for (int i = 0; i < 20 && !both_stepped(first); ++i) first = shown_by_rank(dump_dom(url));
  std::this_thread::sleep_for(1500ms);
  second = shown_by_rank(dump_dom(url));
  ASSERT_TRUE(both_stepped(first)) << "the page does not show both ranks training";
  ASSERT_TRUE(both_stepped(second));
  EXPECT_NE(first[0]["step"], second[0]["step"]) << "the figures did not change between reads";
  EXPECT_NE(first[0]["samples_per_s"], second[0]["samples_per_s"]);
  expect_equals_jsonl(first, dir / "live");
  expect_equals_jsonl(second, dir / "live");
  const fs::path png = dir / "dashboard.png";
  cohort::testing::screenshot(url, png, 1100);
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 20000u) << "a blank page?";
}

}  // namespace
