#pragma once
// The "model_parallel" strategy: a GPT split over a device mesh (mesh.h), dp x pp x tp =
// world size. Each rank holds the layers of its pipeline stage (gpt_partition.h), built with
// tensor-parallel layers over its tp group when tp > 1 (tensor_parallel.h); a step runs the
// pipeline schedule over micro-batches (pipeline_engine.h), then averages gradients over the
// dp group (every rank of one dp group holds the same stage and shard). The trainer selects it
// when parallel.pp or parallel.tp is above 1 (docs/parallelism.md).
//
// Equivalence: the stages and shards keep the whole model's names and initial values, the
// loss is the mean over the global batch, and gradient clipping takes the norm over every
// stage and shard (each replicated parameter once), so training matches one process on the
// same global batch within float rounding.
//
// Checkpoints hold whole tensors: each stage's tensors, joined over its tp group, written by
// its dp-0, tp-0 rank (Strategy::model_pieces, optimizer_pieces); one process, or any other
// mesh, loads them and cuts what it holds (load_model, load_optimizer).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cohort/parallel/flat_average.h"
#include "cohort/parallel/mesh.h"
#include "cohort/parallel/pipeline/gpt_partition.h"
#include "cohort/parallel/pipeline/pipeline_engine.h"
#include "cohort/parallel/strategy.h"
#include "cohort/parallel/strategy_registry.h"

namespace cohort::parallel {

struct ModelParallelOptions {
  int micro_batches = 4;  // pipeline.micro_batches: each batch is cut into this many
  PipelineOptions pipeline;
};
ModelParallelOptions model_parallel_options_from(const Config& cfg);

// The module this rank trains under `mesh` (its stage's layers, tp-sharded), from the GPT
// options and pipeline.balance / pipeline.layers. Collective over the mesh's world when
// pipeline.balance = "time" (rank 0's measurement decides for every rank).
std::shared_ptr<GptChunks> make_gpt_chunks(const nn::GptOptions& o, const DeviceMesh& mesh,
                                           const Config& cfg, int64_t micro_batch);

// Checkpoints: each stage's tensors in pieces from the rank that writes them, whatever world
// reads them back (model_parallel_checkpoint.cc).
class ModelParallelStrategy : public Strategy,
                              public StrategyCheckpoint,
                              public StrategyMetrics,
                              public StrategyLifecycle {
 public:
  // ctx.model must be the GptChunks make_gpt_chunks built, ctx.mesh its mesh.
  explicit ModelParallelStrategy(const StrategyContext& ctx);
  std::string name() const override { return "model_parallel"; }

  // The loss is the model's own cross-entropy over the (tp-sharded) vocabulary; `loss` is not
  // used.
  ForwardBackwardResult forward_backward(const std::vector<MicroBatch>& micro,
                                         const LossFn& loss) override;
  Tensor eval_forward(const Tensor& x) override;
  double clip_grad_norm(double max_norm) override;
  StrategyStats last_stats() const override { return stats_; }
  nlohmann::json take_interval_metrics() override;
  nlohmann::json summary_metrics() const override { return summary_; }
  std::string summary_line() const override;
  void finish_training() override;

  CheckpointPieces pieces() const override;
  void load(const CheckpointSource& from) override;

  // The parts of the checkpoint facet (collective like it).
  std::vector<ckpt::TensorPiece> model_pieces() const;
  std::vector<ckpt::TensorPiece> optimizer_pieces() const;
  std::map<std::string, double> optimizer_scalars() const;
  void load_model(const nn::StateDict& state);
  void load_model_from(const ckpt::ShardedView& view, const std::function<nn::StateDict()>& whole);
  void load_optimizer(const ckpt::ShardedView& view, const std::map<std::string, double>& scalars);

 private:
  // The whole tensor of a tp-sharded one (collective over the tp group).
  Tensor join_over_tp(const Tensor& local, const nn::ShardSpec& spec) const;
  const nn::ShardSpec* spec_of(const std::string& param) const;
  // Whether this rank writes its stage's whole tensors into checkpoints.
  bool writes_stage() const { return mesh_->coord.dp == 0 && mesh_->coord.tp == 0; }
  std::vector<MicroBatch> cut(const std::vector<MicroBatch>& micro) const;

  std::shared_ptr<const DeviceMesh> mesh_;
  GptChunks& chunks_;
  ModelParallelOptions options_;
  std::map<std::string, nn::ShardSpec> specs_;
  std::shared_ptr<comm::ProcessGroup> model_group_;  // the pp x tp ranks of this dp index
  std::unique_ptr<PipelineEngine> engine_;
  std::unique_ptr<FlatAverager> averager_;  // over dp; null when dp = 1
  StrategyStats stats_;
  // Pipeline figures summed over the steps since the last interval, and over the run.
  struct Sums {
    int64_t steps = 0;
    double total_s = 0, compute_s = 0, send_wait_s = 0, recv_wait_s = 0, bubble_s = 0;
    void add(const PipelineStats& s);
  } interval_, run_;
  int64_t peak_activation_bytes_ = 0;
  int64_t last_micro_batches_ = 0;  // the pipeline's m in the last step
  nlohmann::json summary_ = nlohmann::json::object();
};

StrategyRegistration model_parallel_strategy_registration();

}  // namespace cohort::parallel
