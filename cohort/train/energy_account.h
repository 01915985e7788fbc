#pragma once
// Internal to train/: this rank's energy, step by step (energy.* keys; the meter itself is
// metrics/energy.h), and the job's, summed over ranks at evaluations and at the end.
//
// What is counted: training steps only, like train_s — from the end of one step (its data
// wait included) to the end of the next. Evaluations, checkpoints and start-up restart the
// meter, so they are not counted. Each step's energy is split between computing (data,
// forward, backward, optimizer) and waiting on communication (the exposed allreduce,
// StepTimes::exposed_s) by wall-clock share: the meter is read once per step, not inside
// backward, so the wait's share of the step's wall time is its share of the energy.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cohort/core/config.h"
#include "cohort/metrics/energy.h"
#include "cohort/train/step_metrics.h"
#include "cohort/train/trainer.h"

namespace cohort::train {

struct TrainWorld;

class EnergyAccount {
 public:
  EnergyAccount() = default;  // energy.source = "off": every call does nothing
  explicit EnergyAccount(std::unique_ptr<metrics::EnergyReader> reader);
  bool on() const { return reader_ != nullptr; }
  const char* source() const { return on() ? reader_->source() : "off"; }
  // Whatever ran since the last reading (an evaluation, a checkpoint) is not counted.
  void restart();
  // Ends a step: one reading (a couple of clock reads, or the RAPL files), split by t.exposed_s.
  void end_step(const StepTimes& t);
  // {"energy_j", "energy_comm_j"} of the steps since the last call (per interval, so that a
  // dashboard may sum them); empty when off.
  nlohmann::json take_interval();

  double total_j = 0, total_comm_j = 0;  // this rank, this run
  int64_t samples = 0;                   // this rank's samples in the counted steps
  // The job's (all ranks), set by finish_energy; to_target_j by energy_at_eval (chief).
  double job_j = 0, job_comm_j = 0, job_samples = 0, to_target_j = -1;

 private:
  std::unique_ptr<metrics::EnergyReader> reader_;
  double last_wall_s_ = 0;
  double interval_j_ = 0, interval_comm_j_ = 0;
};

// From the energy.* keys; the model's cores are this rank's intra-op threads, RAPL's
// split the ranks on this host. InvalidArgument naming the key (metrics/energy.h).
EnergyAccount make_energy_account(const Config& cfg, const TrainWorld& world);

// Every rank, at each evaluation: the job's joules so far (one allreduce of a double when
// there is a process group; else this rank's times the world size, an estimate), or -1 when
// off. Records the first evaluation reaching metrics.target_accuracy; restarts the meter.
double energy_at_eval(Trainer::State& s, const EvalResult& r);
// Every rank, after the last step: the job's totals (one allreduce where there is a group).
void finish_energy(Trainer::State& s);
// The summary record's energy fields (empty when off), and the line the chief prints.
nlohmann::json energy_summary_json(const Trainer::State& s);
std::string energy_summary_line(const Trainer::State& s);

}  // namespace cohort::train
