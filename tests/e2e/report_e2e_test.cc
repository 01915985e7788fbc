// `cohort report` on real runs: `cohort train` with 1 and 2 workers (a small synthetic MLP
// job), then `cohort report` on both run directories; the figures embedded in the page must
// equal what the runs wrote to their JSONL files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cohort/report/html.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::last_record;
using cohort::testing::run_cli;
using json = nlohmann::json;

namespace {

// Synthetic data, the default MLP, one thread per worker, metrics every step, an evaluation
// every 8 steps.
std::string job(const fs::path& dir, const std::string& name, int workers) {
  return "train /dev/null --workers " + std::to_string(workers) +
         " --set data.dataset=synthetic --set data.synthetic_samples=1024"
         " --set data.batch_size=32 --set run.threads=1 --set run.log_every=1"
         " --set train.eval_every=8 --set run.progress=none --set comm.timeout_s=30"
         " --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

// step -> record of `event` in a JSONL file (the last record of a step wins).
std::map<int64_t, json> records(const fs::path& jsonl, const std::string& event) {
  std::ifstream in(jsonl);
  std::map<int64_t, json> out;
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    if (j["event"] == event) out[j["step"].get<int64_t>()] = j;
  }
  return out;
}

// Checks one run's figures against its files.
void expect_run_matches(const json& fig, const fs::path& dir, int workers) {
  std::map<int64_t, json> steps = records(dir / "metrics.jsonl", "step");
  std::map<int64_t, json> evals = records(dir / "metrics.jsonl", "eval");
  ASSERT_EQ(fig["loss"]["step"].size(), steps.size());
  size_t i = 0;
  for (const auto& [step, r] : steps) {
    EXPECT_EQ(fig["loss"]["step"][i], step);
    EXPECT_EQ(fig["loss"]["loss"][i], r["loss"]) << "step " << step;
    ++i;
  }
  ASSERT_GE(evals.size(), 2u);
  ASSERT_EQ(fig["eval"]["accuracy"].size(), evals.size());
  i = 0;
  for (const auto& [step, r] : evals) {
    EXPECT_EQ(fig["eval"]["accuracy"][i], r["accuracy"]) << "eval at step " << step;
    EXPECT_EQ(fig["eval"]["train_s"][i], r["train_s"]);
    EXPECT_EQ(fig["eval"]["energy_j"][i++], r.value("energy_j", json(nullptr)));
  }
  json sum = last_record(dir / "metrics.jsonl", "summary");
  EXPECT_EQ(fig["summary"]["samples_per_s"], sum["samples_per_s"]);
  EXPECT_EQ(fig["summary"]["final_accuracy"], sum["eval_accuracy"]);
  EXPECT_EQ(fig["summary"]["wall_seconds"], sum["wall_seconds"]);
  ASSERT_EQ(fig["breakdown"].size(), size_t(workers));
  for (int rank = 0; rank < workers; ++rank) {
    fs::path f = dir / (rank == 0 ? "metrics.jsonl" : "metrics.rank1.jsonl");
    json s = last_record(f, "summary");
    for (const char* k :
         {"data_ms", "forward_ms", "backward_ms", "optimizer_ms", "comm_ms", "exposed_comm_ms"})
      EXPECT_EQ(fig["breakdown"][rank][k], s[k]) << "rank " << rank << " " << k;
  }
  EXPECT_EQ(fig["workers"], workers);
  // Energy: shown exactly where the summary carries it, "not recorded" (null) where not.
  EXPECT_EQ(fig["energy"]["recorded"], sum.contains("energy_j"));
  EXPECT_EQ(fig["energy"]["energy_j"], sum.value("job_energy_j", json(nullptr)));  // all ranks
  EXPECT_EQ(fig["energy"]["energy_per_sample_j"], sum.value("energy_per_sample_j", json(nullptr)));
}

TEST(ReportE2E, FiguresOfOneAndTwoWorkerRunsEqualTheirJsonl) {
  fs::path root = cohort::testing::fresh_dir("cohort_report_e2e_", "runs");
  CliResult one = run_cli(job(root, "w1", 1));
  ASSERT_EQ(one.status, 0) << one.output;
  CliResult two = run_cli(job(root, "w2", 2));
  ASSERT_EQ(two.status, 0) << two.output;
  fs::path out = root / "report.html";
  CliResult rep = run_cli("report " + (root / "w1").string() + " " + (root / "w2").string() +
                          " -o " + out.string() + " --target-accuracy 0.5");
  ASSERT_EQ(rep.status, 0) << rep.output;
  EXPECT_NE(rep.output.find(out.string()), std::string::npos) << "prints the output path";
  json d = cohort::report::embedded_data(cohort::testing::read_bytes(out));
  ASSERT_EQ(d["runs"].size(), 2u);
  expect_run_matches(d["runs"][0], root / "w1", 1);
  expect_run_matches(d["runs"][1], root / "w2", 2);
  double sps1 = last_record(root / "w1" / "metrics.jsonl", "summary")["samples_per_s"];
  double sps2 = last_record(root / "w2" / "metrics.jsonl", "summary")["samples_per_s"];
  EXPECT_DOUBLE_EQ(d["scaling"]["rows"][1]["efficiency"].get<double>(), sps2 / (2 * sps1));
  EXPECT_EQ(d["runs"][1]["strategy"], "ddp");
}

TEST(ReportE2E, BadInputIsAClearError) {
  fs::path root = cohort::testing::fresh_dir("cohort_report_e2e_", "bad");
  CliResult missing = run_cli("report " + (root / "nope").string());
  EXPECT_EQ(missing.status, 2) << missing.output;
  EXPECT_NE(missing.output.find((root / "nope").string() + "' does not exist"), std::string::npos)
      << missing.output;
  cohort::testing::write_bytes(root / "metrics.jsonl", "{\"event\":\"start\"}\nnot json\n");
  CliResult bad = run_cli("report " + root.string());
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("metrics.jsonl:2: not valid JSON"), std::string::npos) << bad.output;
}

}  // namespace
