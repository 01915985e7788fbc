#pragma once
// Internal to train/: the state Trainer's files share. Not part of the public API.
#include <chrono>
#include <memory>
#include <string>

#include "cohort/optim/schedule.h"
#include "cohort/train/components.h"
#include "cohort/train/metrics_log.h"
#include "cohort/train/trainer.h"

namespace cohort::train {

using Clock = std::chrono::steady_clock;

struct Trainer::State {
  Config cfg;
  DataSplits data;
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::LrSchedule> schedule;
  std::unique_ptr<MetricsLog> log;
  std::string run_dir;
  int64_t batch = 0;
  int64_t total_steps = 0;
  int64_t steps_per_epoch = 0;
  int64_t step = 0;
  double train_seconds = 0;
  int64_t samples = 0;
  double loss_ema = 0;
  EvalResult last_eval;
  Clock::time_point start;

  explicit State(const Config& c) : cfg(c) {}
  bool out_of_time() const {
    double limit = cfg.get_float("train.time_limit_s");
    return limit > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= limit;
  }
};

std::string make_run_dir(const Config& cfg);

}  // namespace cohort::train
