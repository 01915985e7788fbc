// Energy on a real run: `cohort train` with 2 workers on a small synthetic job. Every record
// carries its energy fields; the per-interval step energies add up to the summary's; the job's
// energy is the sum of both ranks'; no RAPL here, so the source is the model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::last_record;
using cohort::testing::run_cli;
using json = nlohmann::json;

namespace {

std::vector<json> records(const fs::path& jsonl, const std::string& event) {
  std::ifstream in(jsonl);
  std::vector<json> out;
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    if (j["event"] == event) out.push_back(j);
  }
  return out;
}

TEST(EnergyE2E, TwoWorkerRunRecordsPerIntervalRankAndJobEnergy) {
  fs::path root = cohort::testing::fresh_dir("cohort_energy_e2e_", "runs");
  // An empty rapl_root: "auto" must fall back to the model wherever the test runs.
  fs::path no_rapl = root / "no_rapl";
  fs::create_directories(no_rapl);
  CliResult r = run_cli(
      "train /dev/null --workers 2 --set data.dataset=synthetic"
      " --set data.synthetic_samples=1024 --set data.batch_size=32 --set run.threads=1"
      " --set run.log_every=1 --set train.eval_every=8 --set run.progress=none"
      " --set comm.timeout_s=30 --set metrics.target_accuracy=0.01 --set energy.rapl_root=" +
      no_rapl.string() + " --set run.dir=" + root.string() + " --set run.name=e");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("J (estimate: CPU power model)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("waiting on communication"), std::string::npos) << r.output;
  double rank_sum = 0;
  for (const char* file : {"metrics.jsonl", "metrics.rank1.jsonl"}) {
    fs::path f = root / "e" / file;
    EXPECT_EQ(last_record(f, "start")["energy_source"], "model") << file;
    double steps_j = 0, steps_comm_j = 0;
    std::vector<json> steps = records(f, "step");
    ASSERT_FALSE(steps.empty()) << file;
    for (const json& s : steps) {
      ASSERT_TRUE(s.contains("energy_j") && s.contains("energy_comm_j")) << s.dump();
      EXPECT_GT(s["energy_j"].get<double>(), 0) << s.dump();
      EXPECT_LE(s["energy_comm_j"].get<double>(), s["energy_j"].get<double>());
      steps_j += s["energy_j"].get<double>();
      steps_comm_j += s["energy_comm_j"].get<double>();
    }
    json sum = last_record(f, "summary");
    EXPECT_EQ(sum["energy_source"], "model");
    EXPECT_NEAR(steps_j, sum["energy_j"].get<double>(), 0.05 * sum["energy_j"].get<double>())
        << file << ": per-interval step energies add up to the run's";
    double share = sum["energy_comm_share"];
    EXPECT_GE(share, 0.0);
    EXPECT_LE(share, 1.0);
    EXPECT_GT(sum["energy_per_sample_j"].get<double>(), 0);
    EXPECT_GT(steps_comm_j, 0) << file << ": two workers wait on the allreduce";
    rank_sum += sum["energy_j"].get<double>();
  }
  json chief = last_record(root / "e" / "metrics.jsonl", "summary");
  EXPECT_NEAR(chief["job_energy_j"].get<double>(), rank_sum, 1e-9 * rank_sum);
  EXPECT_NEAR(last_record(root / "e" / "metrics.rank1.jsonl", "summary")["job_energy_j"], rank_sum,
              1e-9 * rank_sum);
  // Evaluations carry the job's energy so far: growing, at most the final total.
  std::vector<json> evals = records(root / "e" / "metrics.jsonl", "eval");
  ASSERT_GE(evals.size(), 2u);
  double prev = 0;
  for (const json& e : evals) {
    double j = e["energy_j"];
    EXPECT_GE(j, prev);
    EXPECT_LE(j, rank_sum * (1 + 1e-9));
    prev = j;
  }
  // 1% accuracy: the first evaluation reached it.
  EXPECT_EQ(chief["energy_to_target_j"], evals.front()["energy_j"]);
}

TEST(EnergyE2E, OffRecordsNoEnergyAndRaplWithoutCountersNamesTheKey) {
  fs::path root = cohort::testing::fresh_dir("cohort_energy_e2e_", "off");
  std::string job =
      "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=256"
      " --set data.batch_size=32 --set run.threads=1 --set run.progress=none --set run.dir=" +
      root.string();
  CliResult off = run_cli(job + " --set run.name=off --set energy.source=off");
  ASSERT_EQ(off.status, 0) << off.output;
  EXPECT_EQ(off.output.find("energy:"), std::string::npos) << off.output;
  EXPECT_FALSE(last_record(root / "off" / "metrics.jsonl", "summary").contains("energy_j"));
  CliResult rapl = run_cli(job + " --set run.name=rapl --set energy.source=rapl" +
                           " --set energy.rapl_root=" + (root / "none").string());
  EXPECT_NE(rapl.status, 0);
  EXPECT_NE(rapl.output.find("energy.source"), std::string::npos) << rapl.output;
}

}  // namespace
