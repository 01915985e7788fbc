#pragma once
// Pipeline schedules, pure (no communication): the order in which one pipeline stage runs the
// forwards and backwards of its micro-batches, and the messages it exchanges around each.
// pipeline_engine.h executes them; tests simulate every stage's plan together to prove that
// the stages agree on every message and cannot deadlock (docs/pipeline.md).
//
//   kGPipe:  every forward, then every backward, both in micro-batch order (the same order on
//            every stage, so gradients flow back in the order activations flowed forward).
//   k1F1B:   PipeDream-flush / Megatron's non-interleaved schedule: stage s runs
//            min(p - s - 1, m) warm-up forwards, then alternates one forward and one backward,
//            then drains the remaining backwards. At most p - s micro-batches in flight.
//   kInterleaved1F1B: Megatron's virtual stages: with v chunks per rank, chunk c of rank r is
//            virtual stage c * p + r. Needs m % p == 0; with m == p every forward runs first.
//            Idle fraction (p - 1) / (v * m + p - 1).
#include <string>
#include <vector>

namespace cohort::parallel {

enum class PipelineSchedule { kGPipe, k1F1B, kInterleaved1F1B };

// "gpipe", "1f1b", "interleaved"; InvalidArgument naming pipeline.schedule otherwise.
PipelineSchedule parse_pipeline_schedule(const std::string& name);
const char* pipeline_schedule_name(PipelineSchedule s);

struct PipelineAction {
  enum Kind { kForward, kBackward } kind;
  int micro;
  int chunk;  // this rank's chunk (0 unless interleaved)
};

// This stage's actions. chunks must be 1 for kGPipe and k1F1B. InvalidArgument naming the
// value for stages < 1, stage outside [0, stages), micro_batches < 1, chunks < 1, and for
// interleaved micro_batches % stages != 0.
std::vector<PipelineAction> make_pipeline_schedule(PipelineSchedule schedule, int stages, int stage,
                                                   int micro_batches, int chunks = 1);

// One message of a stage's plan. `micro` and `chunk` name the action on THIS rank the message
// belongs to: a received activation is the input of forward (micro, chunk); a sent gradient is
// the input gradient of backward (micro, chunk).
struct PipelineTransfer {
  enum Kind { kSend, kRecv } kind;
  bool gradient;  // false: an activation (forward), true: its gradient (backward)
  int peer;       // pipeline rank
  int micro;
  int chunk;
};

// What a stage posts together (one batch_send_recv) before each action: plan[i] holds the
// sends of the previous unit's outputs and the receives of this unit's inputs; plan[n] sends
// the last outputs. A unit is one action, or, with chunks > 1, a steady-state forward and the
// backward after it (Megatron's send_forward_backward_recv_forward_backward). Posting sends
// together with the next receives is Megatron's pairing: neighbours that both send never wait
// on each other's sends. Plans without a unit entry have an empty batch there. Proven
// consistent and deadlock-free (even when no send buffers) for GPipe, 1F1B, and interleaved
// with m >= p (tests/parallel/pipeline_schedule_test.cc). With m == p (every forward first)
// nothing is paired.
std::vector<std::vector<PipelineTransfer>> make_pipeline_comm_plan(
    const std::vector<PipelineAction>& actions, int stages, int stage, int chunks = 1);

// The idle fraction of an ideal pipeline with uniform stage times: (p - 1) / (m + p - 1);
// interleaved with v chunks: (p - 1) / (v * m + p - 1) (Megatron-LM, Narayanan et al. 2021).
double pipeline_bubble_formula(PipelineSchedule schedule, int stages, int micro_batches,
                               int chunks = 1);

}  // namespace cohort::parallel
