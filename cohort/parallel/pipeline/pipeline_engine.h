#pragma once
// PipelineEngine: pipeline-parallel forward and backward of micro-batches over a chain of model
// chunks, one (or, interleaved, several) per rank of a pipeline group (GPipe, PipeDream-flush
// 1F1B, Megatron's interleaved 1F1B; docs/pipeline.md). The engine knows nothing about the model: a
// chunk is any nn::Module whose forward takes the previous chunk's output.
//
//   auto shape = [](const Tensor& x) { return Shape{x.size(0), x.size(1), 256}; };
//   PipelineEngine pipe({my_chunk}, pp_group, {.schedule = PipelineSchedule::k1F1B}, shape);
//   double loss = pipe.forward_backward(micro_batches, cross_entropy_fn);  // grads in .grad
//
// Every rank of the group calls forward_backward with the same micro-batches (inputs and
// targets): the first stage feeds the inputs to its chunk, the others use them only for
// activation_shape, the last stage uses the targets. Messages: activations and their gradients,
// float32 contiguous, each boundary [activation_shape(input)]; tags encode (micro-batch,
// boundary, activation|gradient) so that a stage that takes a message out of turn fails with
// CollectiveMismatch instead of computing on the wrong data.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cohort/comm/process_group.h"
#include "cohort/nn/module.h"
#include "cohort/parallel/pipeline/pipeline_schedule.h"

namespace cohort::parallel {

struct PipelineOptions {
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  // Keep only each chunk's input (and its dropout counters) between forward and backward;
  // re-run the forward under grad right before the backward (activation checkpointing).
  bool recompute = false;
  std::chrono::milliseconds timeout{60000};  // every exchange with a neighbour
  // Fault/delay seam: each forward of a chunk also sleeps this long, each backward twice as
  // long, so stage times are uniform and known (bench/pipeline_bubble).
  double stage_delay_s = 0;
  // Ranks as threads of one process share its allocator: with this set, the engine holds a
  // process-wide lock around its tensor work so that peak_activation_bytes is this rank's
  // alone (tests and the bench). Off by default: a chunk whose forward runs a collective
  // (tensor-parallel layers) would wait for a peer thread that waits for the lock. Ranks as
  // processes never contend on it.
  bool exclusive_compute = false;
};

struct PipelineMicroBatch {
  Tensor input;
  Tensor target;
  double weight = 1;
};

// The loss of the last stage's output for one micro-batch (e.g. cross entropy); the engine
// multiplies it by the micro-batch's weight.
using PipelineLossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;
// The shape of the activation a chunk boundary carries for a micro-batch (e.g. [b, T, C] from
// the input [b, T]); its gradient has the same shape.
using ActivationShapeFn = std::function<Shape(const Tensor& micro_input)>;

struct PipelineStats {  // of the last forward_backward, this rank
  double total_s = 0;
  double compute_s = 0;        // forwards, backwards, losses and stage_delay_s sleeps
  double send_wait_s = 0;      // exchanges that only sent
  double recv_wait_s = 0;      // exchanges that received (and maybe sent)
  double bubble_s = 0;         // total_s - compute_s: idle, waiting for neighbours
  double bubble_fraction = 0;  // bubble_s / total_s
  // pipeline_bubble_formula: (p - 1) / (m + p - 1); interleaved with v chunks per rank
  // (p - 1) / (v * m + p - 1), Megatron's bubble (p - 1) / (v * m) of the ideal time as a
  // fraction of the step.
  double formula = 0;
  // Peak, over the step, of the bytes kept for backward by the micro-batches in flight on this
  // rank: for each, what its forward left allocated (allocator figures, the received input
  // included, the copy being sent excluded). Exact when nothing else in the process allocates
  // during a forward: ranks as threads take one lock around the engine's tensor work, but
  // what a thread does outside the engine (building its model or batches) counts too, so
  // tests and benches barrier before the step.
  int64_t peak_activation_bytes = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;  // the group's counters over the step
};

class PipelineEngine {
 public:
  // chunks: this rank's model chunks: exactly one for gpipe and 1f1b, v >= 1 for interleaved
  // (Megatron's virtual pipeline stages). Chunk c of pp-rank r is virtual stage c * p + r; its
  // output goes to pp-rank (r + 1) % p (from the last rank back to rank 0 for chunk c + 1).
  // With p = 1 the chunks pass activations and gradients to each other locally. The first
  // virtual stage's chunk takes micro.input as is (e.g. int64 tokens); the last returns what
  // the loss takes. group: the pipeline group (rank = stage). InvalidArgument for no chunks, a
  // null chunk or group, several chunks without the interleaved schedule, an empty
  // activation_shape, or a timeout <= 0.
  PipelineEngine(std::vector<std::shared_ptr<nn::Module>> chunks,
                 std::shared_ptr<comm::ProcessGroup> group, PipelineOptions options,
                 ActivationShapeFn activation_shape);

  // Forward and backward of every micro-batch in schedule order. Interleaved needs m % p == 0
  // (m >= p): otherwise InvalidArgument naming pipeline.micro_batches and parallel.pp. Gradients
  // accumulate into the chunks' parameters (.grad) as one process's backward of sum_k weight_k *
  // loss_k would. Returns sum_k weight_k * loss_k on every rank (the last stage broadcasts it). A
  // neighbour that does not answer within options.timeout is a Timeout (or the group's IoError)
  // naming this stage, the peer stage and the micro-batch.
  double forward_backward(const std::vector<PipelineMicroBatch>& micro, const PipelineLossFn& loss);

  // Forward only, without autograd graph (evaluation). Returns the last stage's output on the
  // last stage and an undefined Tensor elsewhere (only the last stage needs it to score).
  Tensor forward_only(const Tensor& input);

  const PipelineStats& last_stats() const { return stats_; }
  int stage() const { return stage_; }
  int stages() const { return stages_; }

 private:
  struct Step;
  void exchange(const std::vector<PipelineTransfer>& ops, Step& st);
  void run_forward(const PipelineAction& a, Step& st);
  void run_backward(const PipelineAction& a, Step& st);
  double broadcast_loss(double loss);
  uint32_t tag(bool gradient, int micro, int boundary) const;
  void delay(double seconds, Step& st) const;

  std::vector<std::shared_ptr<nn::Module>> chunks_;
  std::shared_ptr<comm::ProcessGroup> group_;
  PipelineOptions opt_;
  ActivationShapeFn shape_;
  int stage_ = 0, stages_ = 1;
  PipelineStats stats_;
};

}  // namespace cohort::parallel
