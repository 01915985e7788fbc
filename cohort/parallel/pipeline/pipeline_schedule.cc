#include "cohort/parallel/pipeline/pipeline_schedule.h"

#include <algorithm>

#include "cohort/core/error.h"

namespace cohort::parallel {

PipelineSchedule parse_pipeline_schedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::kGPipe;
  if (name == "1f1b") return PipelineSchedule::k1F1B;
  if (name == "interleaved") return PipelineSchedule::kInterleaved1F1B;
  throw InvalidArgument(detail::str("pipeline.schedule: unknown schedule \"", name,
                                    "\" (expected gpipe, 1f1b or interleaved)"));
}

const char* pipeline_schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGPipe:
      return "gpipe";
    case PipelineSchedule::k1F1B:
      return "1f1b";
    case PipelineSchedule::kInterleaved1F1B:
      return "interleaved";
  }
  return "?";
}

namespace {

using Kind = PipelineAction::Kind;

void check_args(PipelineSchedule schedule, int stages, int stage, int m, int chunks) {
  COHORT_CHECK_ARG(stages >= 1, "pipeline: stages must be >= 1, got ", stages);
  COHORT_CHECK_ARG(stage >= 0 && stage < stages, "pipeline: stage must be in [0, ", stages,
                   "), got ", stage);
  COHORT_CHECK_ARG(m >= 1, "pipeline: micro_batches must be >= 1, got ", m);
  COHORT_CHECK_ARG(chunks >= 1, "pipeline: chunks must be >= 1, got ", chunks);
  if (schedule == PipelineSchedule::kInterleaved1F1B) {
    COHORT_CHECK_ARG(m % stages == 0, "pipeline: the interleaved schedule needs micro_batches (", m,
                     ") to be a multiple of the stages (", stages, ")");
  } else {
    COHORT_CHECK_ARG(chunks == 1, "pipeline: schedule ", pipeline_schedule_name(schedule),
                     " runs one chunk per stage, got chunks = ", chunks,
                     " (use interleaved for virtual stages)");
  }
}

std::vector<PipelineAction> gpipe(int m) {
  std::vector<PipelineAction> out;
  for (int k = 0; k < m; ++k) out.push_back({Kind::kForward, k, 0});
  for (int k = 0; k < m; ++k) out.push_back({Kind::kBackward, k, 0});
  return out;
}

std::vector<PipelineAction> one_f_one_b(int p, int s, int m) {
  const int warmup = std::min(p - s - 1, m);
  std::vector<PipelineAction> out;
  for (int k = 0; k < warmup; ++k) out.push_back({Kind::kForward, k, 0});
  for (int k = 0; k < m - warmup; ++k) {
    out.push_back({Kind::kForward, warmup + k, 0});
    out.push_back({Kind::kBackward, k, 0});
  }
  for (int k = m - warmup; k < m; ++k) out.push_back({Kind::kBackward, k, 0});
  return out;
}

// Megatron-LM's forward_backward_pipelining_with_interleaving: virtual micro-step k runs chunk
// (k mod pv) / p of micro-batch (k / pv) * p + k mod p; backwards walk the chunks in reverse.
PipelineAction interleaved_step(int k, bool forward, int p, int v) {
  int chunk = (k % (p * v)) / p;
  if (!forward) chunk = v - 1 - chunk;
  int micro = (k / (p * v)) * p + k % p;
  return {forward ? Kind::kForward : Kind::kBackward, micro, chunk};
}

std::vector<PipelineAction> interleaved(int p, int s, int m, int v) {
  const int total = m * v;
  int warmup = (p - s - 1) * 2 + (v - 1) * p;
  if (m == p) warmup = total;  // as Megatron: with m == p every forward runs first
  warmup = std::min(warmup, total);
  std::vector<PipelineAction> out;
  for (int k = 0; k < warmup; ++k) out.push_back(interleaved_step(k, true, p, v));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(interleaved_step(warmup + k, true, p, v));
    out.push_back(interleaved_step(k, false, p, v));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(interleaved_step(k, false, p, v));
  return out;
}

}  // namespace

std::vector<PipelineAction> make_pipeline_schedule(PipelineSchedule schedule, int stages, int stage,
                                                   int micro_batches, int chunks) {
  check_args(schedule, stages, stage, micro_batches, chunks);
  switch (schedule) {
    case PipelineSchedule::kGPipe:
      return gpipe(micro_batches);
    case PipelineSchedule::k1F1B:
      return one_f_one_b(stages, stage, micro_batches);
    case PipelineSchedule::kInterleaved1F1B:
      return interleaved(stages, stage, micro_batches, chunks);
  }
  throw InvalidArgument("pipeline: unknown schedule");
}

namespace {

// The transfer bringing action a's input, if any.
bool input_of(const PipelineAction& a, int p, int s, int v, PipelineTransfer* t) {
  const int vs = a.chunk * p + s, last = p * v - 1;
  if (a.kind == Kind::kForward) {
    if (vs == 0) return false;
    *t = {PipelineTransfer::kRecv, false, (s + p - 1) % p, a.micro, a.chunk};
  } else {
    if (vs == last) return false;
    *t = {PipelineTransfer::kRecv, true, (s + 1) % p, a.micro, a.chunk};
  }
  return true;
}

// The transfer carrying action a's output away, if any.
bool output_of(const PipelineAction& a, int p, int s, int v, PipelineTransfer* t) {
  const int vs = a.chunk * p + s, last = p * v - 1;
  if (a.kind == Kind::kForward) {
    if (vs == last) return false;
    *t = {PipelineTransfer::kSend, false, (s + 1) % p, a.micro, a.chunk};
  } else {
    if (vs == 0) return false;
    *t = {PipelineTransfer::kSend, true, (s + p - 1) % p, a.micro, a.chunk};
  }
  return true;
}

}  // namespace

std::vector<std::vector<PipelineTransfer>> make_pipeline_comm_plan(
    const std::vector<PipelineAction>& actions, int stages, int stage, int chunks) {
  std::vector<std::vector<PipelineTransfer>> plan(actions.size() + 1);
  // Units: one action, or (interleaved) a steady-state forward with the backward after it,
  // whose inputs come in one batch and whose outputs leave with the next unit's inputs.
  // With m == p every forward runs first (no steady state): the last forward and the first
  // backward are not a unit, or each stage would wait for the other's backward gradient
  // before sending the activation that backward needs (Megatron's all_warmup_microbatches).
  const bool pairs = chunks > 1 && int(actions.size()) > 2 * stages * chunks;  // m > p
  PipelineTransfer t{};
  std::vector<PipelineTransfer> pending;  // outputs of the previous unit
  for (size_t i = 0; i < actions.size();) {
    size_t n = 1;
    if (pairs && actions[i].kind == Kind::kForward && i + 1 < actions.size() &&
        actions[i + 1].kind == Kind::kBackward) {
      n = 2;
    }
    plan[i] = pending;
    pending.clear();
    for (size_t j = i; j < i + n; ++j) {
      if (input_of(actions[j], stages, stage, chunks, &t)) plan[i].push_back(t);
      if (output_of(actions[j], stages, stage, chunks, &t)) pending.push_back(t);
    }
    i += n;
  }
  plan.back() = pending;
  return plan;
}

double pipeline_bubble_formula(PipelineSchedule schedule, int stages, int micro_batches,
                               int chunks) {
  const int v = schedule == PipelineSchedule::kInterleaved1F1B ? chunks : 1;
  return double(stages - 1) / double(v * micro_batches + stages - 1);
}

}  // namespace cohort::parallel
