#pragma once
// Internal to train/: the end-of-run summary, and scaling efficiency against a recorded
// single-worker run.
//
// A 1-worker run records its throughput in <run.dir>/scaling_baselines.json, keyed by what
// decides the speed of one worker (model, parameter count, dataset, per-worker batch, threads).
// An N-worker run of the same setup then reports
//   efficiency = samples/s with N workers / (N * samples/s with 1 worker)
// against the 1-worker run with its threads per worker, else one with another thread count;
// then the summary adds the per-core efficiency and says that the threads differ.
#include "cohort/train/trainer_state.h"

namespace cohort::train {

// Chief only. Records (1 worker) or compares (N workers); returns the efficiency, or -1.
double record_or_compare_scaling(const Trainer::State& s, const TrainSummary& sum);
// The 1-worker samples/s recorded for this setup and thread count, or -1 (the dashboard's
// live efficiency, shown only like with like).
double recorded_baseline(const Trainer::State& s);
// Prints the summary (chief) and appends the summary record to this rank's metrics file.
void write_summary(Trainer::State& s, const TrainSummary& sum, double wall_seconds);

}  // namespace cohort::train
