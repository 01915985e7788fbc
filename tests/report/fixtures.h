#pragma once
// Run directories written by the report tests, in the shapes `cohort train` writes
// (cohort/train: trainer_run.cc "start", trainer_loop.cc "step"/"eval", scaling_baseline.cc
// "summary"): a 1-worker run and a 2-worker run of the same model, the second with energy.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/files.h"

namespace cohort::testing {

using json = nlohmann::json;

inline void write_jsonl(const std::filesystem::path& path, const std::vector<json>& records) {
  std::string text;
  for (const json& r : records) text += r.dump() + "\n";
  write_bytes(path, text);
}

inline json start_record(int rank, int workers) {
  return {{"event", "start"}, {"model", "mlp"}, {"parameters", 1000}, {"total_steps", 4},
          {"start_step", 0},  {"rank", rank},   {"workers", workers}, {"threads", 1}};
}

// A step record: per-step means (ms) over an interval of `steps` steps.
inline json step_record(int rank, int64_t step, double loss, double sps, double base_ms,
                        double comm_ms, double exposed_ms) {
  return {{"event", "step"},
          {"step", step},
          {"rank", rank},
          {"loss", loss},
          {"samples_per_s", sps},
          {"data_ms", base_ms},
          {"forward_ms", 2 * base_ms},
          {"backward_ms", 3 * base_ms + exposed_ms},
          {"optimizer_ms", 0.5},
          {"exposed_comm_ms", exposed_ms},
          {"comm_ms", comm_ms},
          {"steps", 2},
          {"epoch", 0},
          {"lr", 0.05}};
}

inline json eval_record(int64_t step, double loss, double acc, double train_s) {
  return {{"event", "eval"}, {"split", "test"}, {"step", step},       {"loss", loss},
          {"accuracy", acc}, {"samples", 100},  {"train_s", train_s}, {"time_s", train_s + 1}};
}

inline json summary_record(int rank, int workers, double sps, double base_ms, double comm_ms,
                           double exposed_ms) {
  return {{"event", "summary"},        {"rank", rank},
          {"workers", workers},        {"steps", 4},
          {"train_seconds", 2.0},      {"samples_per_s", sps},
          {"eval_loss", 1.2},          {"eval_accuracy", 0.72},
          {"wall_seconds", 5.0},       {"data_ms", base_ms},
          {"forward_ms", 2 * base_ms}, {"backward_ms", 3 * base_ms + exposed_ms},
          {"optimizer_ms", 0.5},       {"exposed_comm_ms", exposed_ms},
          {"comm_ms", comm_ms}};
}

// <root>/one: 1 worker, no energy. <root>/two: 2 workers, energy from the CPU power model.
struct FixtureRuns {
  std::filesystem::path one, two;
};

inline FixtureRuns write_fixture_runs(const std::filesystem::path& root) {
  FixtureRuns f{root / "one", root / "two"};
  std::filesystem::create_directories(f.one);
  std::filesystem::create_directories(f.two);
  write_bytes(f.one / "config.toml", "[parallel]\nstrategy = \"ddp\"\n");
  write_bytes(f.two / "config.toml", "[parallel]\nstrategy = \"ddp\"\n");
  write_jsonl(f.one / "metrics.jsonl",
              {start_record(0, 1), step_record(0, 2, 2.0, 100, 1.0, 0, 0),
               eval_record(2, 1.8, 0.55, 0.5), step_record(0, 4, 1.5, 110, 1.2, 0, 0),
               eval_record(4, 1.2, 0.72, 1.0), summary_record(0, 1, 110, 1.1, 0, 0)});
  json e2 = eval_record(2, 1.7, 0.6, 0.3), e4 = eval_record(4, 1.1, 0.75, 0.6);
  e2["energy_j"] = 20.0;
  e4["energy_j"] = 41.0;
  json s0 = summary_record(0, 2, 190, 1.0, 4.0, 1.0);
  s0.update({{"energy_j", 50.0},
             {"energy_per_sample_j", 0.0125},
             {"energy_comm_share", 0.2},
             {"energy_source", "model"}});
  write_jsonl(f.two / "metrics.jsonl",
              {start_record(0, 2), step_record(0, 2, 2.1, 95, 1.0, 4.0, 1.0), e2,
               step_record(0, 4, 1.4, 96, 1.0, 4.0, 1.0), e4, s0});
  write_jsonl(
      f.two / "metrics.rank1.jsonl",
      {start_record(1, 2), step_record(1, 2, 2.2, 93, 1.5, 5.0, 2.0),
       step_record(1, 4, 1.6, 94, 1.5, 5.0, 2.0), summary_record(1, 2, 190, 1.5, 5.0, 2.0)});
  return f;
}

}  // namespace cohort::testing
