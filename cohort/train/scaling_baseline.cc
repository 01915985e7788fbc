#include "cohort/train/scaling_baseline.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cohort/core/logging.h"
#include "cohort/core/thread_pool.h"

namespace cohort::train {
namespace {

namespace fs = std::filesystem;

// Short runs are dominated by start-up; they neither record nor compare.
constexpr int64_t kMinStepsForBaseline = 20;

std::string baseline_key(const Trainer::State& s) {
  return detail::str(s.cfg.get_string("model.type"), " params=", s.model->num_parameters(),
                     " data=", s.cfg.get_string("data.dataset"), " batch=", s.batch,
                     " threads=", num_threads());
}

fs::path baseline_file(const Trainer::State& s) {
  return fs::path(s.cfg.get_string("run.dir")) / "scaling_baselines.json";
}

nlohmann::json read_baselines(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) return j;
  log::warn("train", "ignoring unreadable scaling baselines in ", file.string());
  return nlohmann::json::object();
}

// Temporary file + rename: a crash never leaves a half-written file behind.
void write_baselines(const fs::path& file, const nlohmann::json& j) {
  fs::path tmp = file;
  tmp += ".tmp";
  std::ofstream(tmp) << j.dump(2) << "\n";
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) log::warn("train", "cannot write ", file.string(), ": ", ec.message());
}

}  // namespace

double recorded_baseline(const Trainer::State& s) {
  nlohmann::json all = read_baselines(baseline_file(s));
  const std::string key = baseline_key(s);
  return all.contains(key) ? all[key].value("samples_per_s", -1.0) : -1;
}

double record_or_compare_scaling(const Trainer::State& s, const TrainSummary& sum) {
  if (sum.steps - s.start_step < kMinStepsForBaseline) return -1;
  fs::path file = baseline_file(s);
  nlohmann::json all = read_baselines(file);
  std::string key = baseline_key(s);
  if (sum.workers == 1) {
    all[key] = {{"samples_per_s", sum.samples_per_s}, {"run_dir", s.run_dir}};
    write_baselines(file, all);
    return -1;
  }
  if (!all.contains(key)) return -1;
  double one = all[key].value("samples_per_s", 0.0);
  return one > 0 ? sum.samples_per_s / (sum.workers * one) : -1;
}

void write_summary(Trainer::State& s, const TrainSummary& sum, double wall_seconds) {
  const StepTimes& t = s.metrics.run_total();
  double steps = double(std::max<int64_t>(s.metrics.run_steps(), 1));
  nlohmann::json j{{"event", "summary"},
                   {"rank", s.world->rank},
                   {"workers", sum.workers},
                   {"steps", sum.steps},
                   {"train_seconds", sum.train_seconds},
                   {"samples_per_s", sum.samples_per_s},
                   {"eval_loss", sum.eval.loss},
                   {"wall_seconds", wall_seconds}};
  j.update(per_step_json(t, s.metrics.run_steps()));
  j.update(s.strategy->summary_metrics());
  j.update(s.stragglers.summary());
  if (sum.eval.accuracy >= 0) j["eval_accuracy"] = sum.eval.accuracy;
  if (sum.comm_hidden >= 0) j["comm_hidden"] = sum.comm_hidden;
  if (sum.scaling_efficiency >= 0) j["scaling_efficiency"] = sum.scaling_efficiency;
  j.update(energy_summary_json(s));
  j.update(s.memory.summary_json());
  s.log.write(j);
  if (!s.world->is_chief()) return;
  std::string acc = sum.eval.accuracy >= 0 ? detail::str(", ", s.data.eval_name, " accuracy ",
                                                         sum.eval.accuracy * 100, "%")
                                           : "";
  std::printf("done: %ld steps in %.1fs (%.0f samples/s), %s loss %.4f%s\n", long(sum.steps),
              sum.train_seconds, sum.samples_per_s, s.data.eval_name.c_str(), sum.eval.loss,
              acc.c_str());
  if (sum.workers > 1) {
    std::printf(
        "workers: %d; allreduce %.0f%% hidden behind backward (%.2f ms/step, %.2f ms "
        "exposed)",
        sum.workers, 100 * std::max(sum.comm_hidden, 0.0), 1e3 * t.comm_s / steps,
        1e3 * t.exposed_s / steps);
    if (sum.scaling_efficiency >= 0)
      std::printf("; scaling efficiency vs 1 worker: %.0f%%", 100 * sum.scaling_efficiency);
    std::printf("\n");
  }
  if (j.contains("straggler")) {
    const nlohmann::json& g = j["straggler"];
    std::printf("straggler: rank %d, named in %ld interval(s) from step %ld, up to %.1fx\n",
                g["rank"].get<int>(), long(g["intervals"].get<int64_t>()),
                long(g["first_step"].get<int64_t>()), g["factor"].get<double>());
  }
  if (const std::string line = s.strategy->summary_line(); !line.empty())
    std::printf("%s\n", line.c_str());
  if (s.energy.on()) std::printf("%s\n", energy_summary_line(s).c_str());
  std::printf("%s\n", s.memory.summary_line(s.world->rank).c_str());
  std::printf("metrics: %s\n", s.metrics_file.c_str());
}

}  // namespace cohort::train
