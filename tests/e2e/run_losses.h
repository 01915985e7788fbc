#pragma once
// Losses of a run as its metrics files hold them, for comparing a resumed run with an
// uninterrupted one step by step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace cohort::testing {

// step -> the mean over ranks of the step's loss (every rank logs its own micro-batches' mean;
// the ranks' shares are equal, so their mean is the loss of the global batch).
inline std::map<int64_t, double> global_losses(const std::filesystem::path& run, int workers) {
  std::map<int64_t, double> sum;
  for (int r = 0; r < workers; ++r) {
    std::filesystem::path f = run / (r == 0 ? std::string("metrics.jsonl")
                                            : "metrics.rank" + std::to_string(r) + ".jsonl");
    std::ifstream in(f);
    EXPECT_TRUE(in.is_open()) << f;
    std::map<int64_t, double> mine;  // a resumed run appends: the last record of a step wins
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j["event"] == "step") mine[j["step"].get<int64_t>()] = j["loss"].get<double>();
    }
    for (auto [step, loss] : mine) sum[step] += loss / workers;
  }
  return sum;
}

// Steps first..last of `resumed` against the same steps of `full`, within 1e-5 relative.
inline void expect_same_losses(const std::map<int64_t, double>& full,
                               const std::map<int64_t, double>& resumed, int64_t first,
                               int64_t last) {
  for (int64_t step = first; step <= last; ++step) {
    ASSERT_TRUE(full.count(step)) << "uninterrupted run has no step " << step;
    ASSERT_TRUE(resumed.count(step)) << "resumed run has no step " << step;
    EXPECT_NEAR(resumed.at(step), full.at(step), 1e-5 * std::abs(full.at(step))) << "step " << step;
  }
}

}  // namespace cohort::testing
