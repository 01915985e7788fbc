#pragma once
// Factories that turn config keys into the trainer's parts. Kept apart from the loop so each
// piece reads on its own and tests can build one part from a Config.
#include <memory>

#include "cohort/core/config.h"
#include "cohort/data/dataset.h"
#include "cohort/nn/models/gpt.h"
#include "cohort/nn/module.h"
#include "cohort/optim/optimizer.h"
#include "cohort/optim/schedule.h"
#include "cohort/parallel/mesh.h"
#include "cohort/train/shard_data.h"
#include "cohort/train/world.h"

namespace cohort::train {

// What a classifier is sized from, taken from the data: one sample's shape ({features} for
// flat rows, {C, H, W} for images) and the number of classes.
struct ModelInputs {
  Shape sample_shape;
  int64_t classes = 0;
  bool tokens = false;  // text: x is int64 token ids [T], classes the vocabulary
};

// Training and evaluation splits. `text` is set for language modelling (random windows).
struct DataSplits {
  std::shared_ptr<const data::Dataset> train;
  std::shared_ptr<const data::Dataset> eval;
  bool is_text = false;
  std::string eval_name;  // "test" or "validation"
  ModelInputs inputs;     // for text: {block_size} token ids, 256 classes (bytes)
  // A shard directory (shard_data.h): `train` holds this worker's shards only, and every worker
  // trains samples_per_worker of its samples per epoch (set by agree_on_shards).
  bool sharded = false;
  int64_t samples_per_worker = 0;
};

void check_combination(const Config& cfg);
// `pick` says which shards this worker opens when data.path is a shard directory (shard_data.h).
DataSplits make_data(const Config& cfg, ShardPick pick = {});
// csv and numpy (file_data.cc): the files data.* names, with the model's inputs from them.
DataSplits make_file_data(const Config& cfg, ShardPick pick = {});
// The model's inputs for the configured data: constants for the built-in data sets; csv and
// numpy read the training file (for roles that build a model without the data: PS servers).
ModelInputs model_inputs(const Config& cfg);
std::shared_ptr<nn::Module> make_model(const Config& cfg, const ModelInputs& inputs);
std::shared_ptr<nn::Module> make_model(const Config& cfg);  // with model_inputs(cfg)
// The GPT's options from model.* and run.seed.
nn::GptOptions gpt_options(const Config& cfg);
// When the model is split over ranks (parallel.pp or parallel.tp > 1, or a strategy that always
// runs on a mesh: parallel::StrategyWorld::on_mesh): the device mesh of parallel.dp x pp x tp,
// with world.data_rank and data_size set to this rank's data-parallel coordinates; null
// otherwise. Collective over the world group. InvalidArgument for a mesh that does not fit the
// job or the model, or a split model under a strategy whose world hook refuses one.
std::shared_ptr<const parallel::DeviceMesh> make_mesh(const Config& cfg, TrainWorld& world);
// The strategy parallel.strategy names, or the one its world hook hands over to when a mesh
// splits the model.
std::string strategy_name(const Config& cfg, const parallel::DeviceMesh* mesh);
// This rank's part of the GPT under `mesh` (parallel/pipeline/model_parallel_strategy.h).
std::shared_ptr<nn::Module> make_model(const Config& cfg, const parallel::DeviceMesh& mesh);
std::unique_ptr<optim::Optimizer> make_optimizer(const Config& cfg, nn::Module& model);
// The same optimizer over any named tensors (a parameter server's slice of the model).
std::unique_ptr<optim::Optimizer> make_optimizer(const Config& cfg, optim::NamedParams params);
std::unique_ptr<optim::LrSchedule> make_schedule(const Config& cfg, int64_t total_steps);

}  // namespace cohort::train
