#pragma once
// The figures of a report, computed from RunData: the JSON block that the HTML page embeds
// (<script type="application/json" id="cohort-data">) and draws with Chart.js. The page only
// draws; every number it shows is computed here, so tests check this block against the JSONL.
//
// Block layout ("format": "cohort-report/1"):
//   layout            "overlay" (runs in one chart) or "compare" (one panel per run)
//   target_accuracy   the --target-accuracy given, or null
//   runs[]            one object per run directory, in the order given:
//     name, dir, workers, threads, strategy, model, parameters, warnings[]
//     loss        {step[], loss[]}                 rank 0's step records (last record of a step
//                                                  wins: a resumed run appends)
//     eval        {step[], train_s[], loss[], accuracy[], energy_j[]}  (null where not recorded)
//     throughput  {step[], samples_per_s[]}        job-wide: the sum over ranks of each rank's
//                                                  samples/s, at the steps every rank logged
//     breakdown[] {rank, data_ms, forward_ms, backward_ms, backward_compute_ms, optimizer_ms,
//                  exposed_comm_ms, comm_ms, step_ms}  per-step means over the run (the rank's
//                  summary record, else its step records weighted by their "steps")
//     comm        {step[], step_ms[], comm_ms[], exposed_ms[]} rank 0's interval means, and
//                 mean {step_ms, comm_ms, exposed_ms, hidden_share} over ranks
//     servers[]   {server, updates_per_s, pushes, dropped_pushes, staleness_mean,
//                  staleness_max, bytes_in, bytes_out}  each parameter server's summary
//     energy      {recorded, energy_j, energy_per_sample_j, comm_share, source, estimate,
//                  to_target_j, to_target_note}  energy_j: the job's (summary job_energy_j),
//                  else rank 0's (energy_j)
//     summary     {workers, strategy, steps, final_accuracy, final_loss, wall_seconds,
//                  train_seconds, samples_per_s, time_to_target_s, running}
//   scaling           {rows[] {run, workers, threads, cores, samples_per_s, baseline,
//                     baseline_threads, efficiency, efficiency_per_core, note}, warnings[]}
//                     threads: per worker (the start record's; null for older runs);
//                     cores = workers * threads. efficiency = samples/s(N) / (N * samples/s(1))
//                     against a 1-worker run of the same model, the one with the same threads
//                     per worker where there is one; null with a note when there is none.
//                     efficiency_per_core = (samples/s(N) / cores(N)) / (samples/s(1) /
//                     cores(1)). When threads per worker differ from the baseline's, the row's
//                     note says so and warnings[] names both runs and their resources
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/report/run_data.h"

namespace cohort::report {

enum class Layout { kOverlay, kCompare };

struct FigureOptions {
  Layout layout = Layout::kOverlay;
  double target_accuracy = -1;  // < 0: none given
};

nlohmann::json run_figures(const RunData& run, const FigureOptions& o);

// The scaling rows of runs whose figures are `figs` (run_figures of each run, same order).
nlohmann::json scaling_figures(const std::vector<nlohmann::json>& figs);

// The whole block.
nlohmann::json report_data(const std::vector<RunData>& runs, const FigureOptions& o);

}  // namespace cohort::report
