#pragma once
// The gossip end-to-end tests' shared job: `cohort train` on the synthetic task with
// parallel.strategy = gossip (2 epochs, batch 32, one thread per worker), and what they read
// back from it.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e/run_cli.h"

namespace cohort::testing {

inline std::string gossip_job(const std::filesystem::path& dir, const std::string& name) {
  return "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=4096"
         " --set data.batch_size=32 --set train.epochs=2 --set run.threads=1"
         " --set run.log_every=4 --set run.progress=none --set comm.timeout_s=30"
         " --set ckpt.enabled=false --set parallel.strategy=gossip --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

inline bool contains(const CliResult& r, const std::string& s) {
  return r.output.find(s) != std::string::npos;
}

// consensus_distance of every step record that has one, in order.
inline std::vector<double> consensus(const std::filesystem::path& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("event", "") == "step" && j.contains("consensus_distance"))
      out.push_back(j["consensus_distance"].get<double>());
  }
  return out;
}

}  // namespace cohort::testing
