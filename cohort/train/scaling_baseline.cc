#include "cohort/train/scaling_baseline.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cohort/core/logging.h"
#include "cohort/core/thread_pool.h"
#include "cohort/train/memory_account.h"

namespace cohort::train {
namespace {

namespace fs = std::filesystem;

// Short runs are dominated by start-up; they neither record nor compare.
constexpr int64_t kMinStepsForBaseline = 20;

// What decides the speed of one worker, but its thread count: a 1-worker run under this key
// is the baseline of every N-worker run under it.
std::string setup_key(const Trainer::State& s) {
  return detail::str(s.cfg.get_string("model.type"), " params=", s.model->num_parameters(),
                     " data=", s.cfg.get_string("data.dataset"), " batch=", s.batch);
}

std::string baseline_key(const Trainer::State& s) {
  return detail::str(setup_key(s), " threads=", num_threads());
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

// A recorded 1-worker run: its samples/s and threads (0 when unknown).
struct Baseline {
  double samples_per_s = -1;
  int64_t threads = 0;
};

// The 1-worker baseline of this run's setup: the one recorded with this run's threads per
// worker, else (unless same_threads_only) one recorded with another thread count. The default
// thread count is cores / local workers, so on one machine a plain 1-worker run and an N-worker
// run differ in threads: requiring the same count made the default 1-worker run never count.
Baseline find_baseline(const Trainer::State& s, bool same_threads_only) {
  nlohmann::json all = read_baselines(baseline_file(s));
  auto baseline = [](const nlohmann::json& e, int64_t threads) {
    return Baseline{e.value("samples_per_s", -1.0), e.value("threads", threads)};
  };
  if (all.contains(baseline_key(s))) return baseline(all[baseline_key(s)], num_threads());
  if (same_threads_only) return {};
  const std::string prefix = setup_key(s) + " threads=";
  for (const auto& [key, e] : all.items()) {
    if (key.rfind(prefix, 0) != 0 || !e.is_object()) continue;
    int64_t threads = std::strtoll(key.c_str() + prefix.size(), nullptr, 10);  // older entries
    return baseline(e, threads);
  }
  return {};
}

// The summary's words for an efficiency against a 1-worker run with other threads per worker:
// per worker the comparison is unlike (a 2-thread worker against 1-thread ones), so the
// per-core figure is given beside it, and the way to a like-with-like one.
std::string unlike_threads_note(const Baseline& b, const TrainSummary& sum, nlohmann::json& j) {
  const int64_t threads = num_threads();
  if (b.threads <= 0 || b.threads == threads) return "";
  double per_core =
      (sum.samples_per_s / double(sum.workers * threads)) / (b.samples_per_s / double(b.threads));
  j["scaling_baseline_threads"] = b.threads;
  j["scaling_efficiency_per_core"] = per_core;
  return detail::str(" (per core ", std::lround(100 * per_core), "%: the 1-worker run had ",
                     b.threads, " thread", b.threads == 1 ? "" : "s", ", these workers ", threads,
                     " each; give both the same run.threads to compare like with like)");
}

}  // namespace

double recorded_baseline(const Trainer::State& s) {
  return find_baseline(s, /*same_threads_only=*/true).samples_per_s;
}

double record_or_compare_scaling(const Trainer::State& s, const TrainSummary& sum) {
  if (sum.steps - s.start_step < kMinStepsForBaseline) return -1;
  if (sum.workers == 1) {
    fs::path file = baseline_file(s);
    nlohmann::json all = read_baselines(file);
    all[baseline_key(s)] = {
        {"samples_per_s", sum.samples_per_s}, {"threads", num_threads()}, {"run_dir", s.run_dir}};
    write_baselines(file, all);
    return -1;
  }
  double one = find_baseline(s, /*same_threads_only=*/false).samples_per_s;
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
  if (parallel::StrategyMetrics* m = s.strategy->metrics()) j.update(m->summary_metrics());
  j.update(s.stragglers.summary());
  if (sum.eval.accuracy >= 0) j["eval_accuracy"] = sum.eval.accuracy;
  if (s.elastic_generation > 0) {  // in-place recovery (train/elastic.h): workers is the end's
    j["membership_changes"] = s.elastic_generation;
    j["recover_s_total"] = s.elastic_recover_s;
  }
  if (sum.comm_hidden >= 0) j["comm_hidden"] = sum.comm_hidden;
  std::string scaling_note;
  if (sum.scaling_efficiency >= 0) {
    j["scaling_efficiency"] = sum.scaling_efficiency;
    scaling_note = unlike_threads_note(find_baseline(s, false), sum, j);
  }
  j.update(energy_summary_json(s));
  j.update(s.memory.summary_json());
  s.log.write(j);
  warn_rss_over_limit(j);  // every rank: each process has its own peak
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
      std::printf("; scaling efficiency vs 1 worker: %.0f%%%s", 100 * sum.scaling_efficiency,
                  scaling_note.c_str());
    std::printf("\n");
  }
  if (s.elastic_generation > 0)
    std::printf(
        "elastic: %d membership change(s), %.2f s recovering in all; %d workers at the "
        "end\n",
        s.elastic_generation, s.elastic_recover_s, sum.workers);
  if (j.contains("straggler")) {
    const nlohmann::json& g = j["straggler"];
    std::printf("straggler: rank %d, named in %ld interval(s) from step %ld, up to %.1fx\n",
                g["rank"].get<int>(), long(g["intervals"].get<int64_t>()),
                long(g["first_step"].get<int64_t>()), g["factor"].get<double>());
  }
  parallel::StrategyMetrics* m = s.strategy->metrics();
  if (const std::string line = m ? m->summary_line() : ""; !line.empty())
    std::printf("%s\n", line.c_str());
  if (s.energy.on()) std::printf("%s\n", energy_summary_line(s).c_str());
  std::printf("%s\n", s.memory.summary_line(s.world->rank).c_str());
  std::printf("metrics: %s\n", s.metrics_file.c_str());
}

}  // namespace cohort::train
