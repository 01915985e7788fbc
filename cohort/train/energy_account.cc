#include "cohort/train/energy_account.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cohort/core/thread_pool.h"
#include "cohort/train/trainer_state.h"

namespace cohort::train {
namespace {

double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Sums `n` doubles over the job in place: one allreduce where there is a group; else this
// rank's values times the world size (parameter-server workers form no group: an estimate
// that assumes every worker used as much as this one).
void sum_over_job(const Trainer::State& s, double* v, size_t n) {
  if (s.world->distributed()) {
    s.world->group->allreduce(
        {.output = v, .count = n, .dtype = comm::DType::f64, .op = comm::ReduceOp::sum});
    return;
  }
  for (size_t i = 0; i < n; ++i) v[i] *= double(s.world->size);
}

}  // namespace

EnergyAccount::EnergyAccount(std::unique_ptr<metrics::EnergyReader> reader)
    : reader_(std::move(reader)), last_wall_s_(wall_now()) {}

void EnergyAccount::restart() {
  if (!on()) return;
  reader_->joules();
  last_wall_s_ = wall_now();
}

void EnergyAccount::end_step(const StepTimes& t) {
  if (!on()) return;
  double now = wall_now();
  double wall = now - last_wall_s_;
  last_wall_s_ = now;
  double j = reader_->joules();
  double comm = wall > 0 ? j * std::clamp(t.exposed_s / wall, 0.0, 1.0) : 0;
  interval_j_ += j;
  interval_comm_j_ += comm;
  total_j += j;
  total_comm_j += comm;
  samples += t.samples;
}

nlohmann::json EnergyAccount::take_interval() {
  if (!on()) return nlohmann::json::object();
  nlohmann::json j{{"energy_j", interval_j_}, {"energy_comm_j", interval_comm_j_}};
  interval_j_ = interval_comm_j_ = 0;
  return j;
}

EnergyAccount make_energy_account(const Config& cfg, const TrainWorld& world) {
  metrics::EnergyOptions o;
  o.source = cfg.get_string("energy.source");
  o.rapl_root = cfg.get_string("energy.rapl_root");
  o.ranks_per_host = world.joined ? world.joined->local_size : 1;
  o.model = {.active_watts_per_core = cfg.get_float("energy.active_watts_per_core"),
             .idle_watts_per_core = cfg.get_float("energy.idle_watts_per_core"),
             .cores = double(num_threads())};
  return EnergyAccount(metrics::make_energy_reader(o));
}

double energy_at_eval(Trainer::State& s, const EvalResult& r) {
  EnergyAccount& e = s.energy;
  if (!e.on()) return -1;
  double job = e.total_j;
  sum_over_job(s, &job, 1);
  double target = s.cfg.get_float("metrics.target_accuracy");
  if (target > 0 && e.to_target_j < 0 && r.accuracy >= target) e.to_target_j = job;
  e.restart();  // the evaluation and this allreduce are not training
  return job;
}

void finish_energy(Trainer::State& s) {
  EnergyAccount& e = s.energy;
  if (!e.on()) return;
  double v[3] = {e.total_j, e.total_comm_j, double(e.samples)};
  sum_over_job(s, v, 3);
  e.job_j = v[0];
  e.job_comm_j = v[1];
  e.job_samples = v[2];
}

nlohmann::json energy_summary_json(const Trainer::State& s) {
  const EnergyAccount& e = s.energy;
  if (!e.on()) return nlohmann::json::object();
  nlohmann::json j{{"energy_j", e.total_j},
                   {"energy_comm_j", e.total_comm_j},
                   {"job_energy_j", e.job_j},
                   {"energy_per_sample_j", e.job_samples > 0 ? e.job_j / e.job_samples : 0.0},
                   {"energy_comm_share", e.job_j > 0 ? e.job_comm_j / e.job_j : 0.0},
                   {"energy_source", e.source()}};
  if (e.to_target_j >= 0) j["energy_to_target_j"] = e.to_target_j;
  return j;
}

std::string energy_summary_line(const Trainer::State& s) {
  const EnergyAccount& e = s.energy;
  if (!e.on()) return "";
  nlohmann::json j = energy_summary_json(s);
  const char* how = std::string(e.source()) == "rapl" ? "measured: RAPL package counters"
                                                      : "estimate: CPU power model";
  char buf[256];
  int n = std::snprintf(buf, sizeof buf,
                        "energy: %.4g J (%s), %.3g J/sample, %.0f%% waiting on communication",
                        e.job_j, how, j["energy_per_sample_j"].get<double>(),
                        100 * j["energy_comm_share"].get<double>());
  if (e.to_target_j >= 0)
    std::snprintf(buf + n, sizeof buf - size_t(n), ", %.4g J to accuracy %g", e.to_target_j,
                  s.cfg.get_float("metrics.target_accuracy"));
  return buf;
}

}  // namespace cohort::train
