#pragma once
// Internal to train/: the run's timeline trace (run.trace, docs/monitoring.md "Timeline trace").
//
// At the start every rank estimates its clock offset to rank 0 (Cristian's algorithm over the
// group), attaches a scope to each module down to run.trace_module_depth (forward and backward
// spans per module, autograd/scope.h) and hands the tracer to the strategy (DDP: each bucket's
// allreduce). The loop adds the step's spans (trace_span). At the end every rank writes
// trace.rank<R>.json into the run dir and rank 0, after the ranks' last barrier, merges them
// into trace.json.
#include "cohort/metrics/trace.h"
#include "cohort/train/trainer_state.h"

namespace cohort::train {

// Collective over the group when distributed. Sets s.tracer (left null when run.trace is off).
void start_trace(Trainer::State& s);

// [from, to] as `name` on the main track, tagged with the step being trained (s.step + 1).
inline void trace_span(Trainer::State& s, const char* name, Clock::time_point from,
                       Clock::time_point to) {
  if (s.tracer) s.tracer->complete(name, "step", from, to, "main", {{"step", s.step + 1}});
}

// This rank's trace.rank<R>.json (every rank, before the final barrier); never throws: a trace
// that cannot be written is reported and the run goes on.
void write_rank_trace(Trainer::State& s) noexcept;
// Rank 0, after every rank wrote its file: trace.json from all of them.
void merge_run_trace(Trainer::State& s) noexcept;

}  // namespace cohort::train
