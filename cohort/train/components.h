#pragma once
// Factories that turn config keys into the trainer's parts. Kept apart from the loop so each
// piece reads on its own and tests can build one part from a Config.
#include <memory>

#include "cohort/core/config.h"
#include "cohort/data/dataset.h"
#include "cohort/nn/module.h"
#include "cohort/optim/optimizer.h"
#include "cohort/optim/schedule.h"

namespace cohort::train {

// Training and evaluation splits. `text` is set for language modelling (random windows).
struct DataSplits {
  std::shared_ptr<const data::Dataset> train;
  std::shared_ptr<const data::Dataset> eval;
  bool is_text = false;
  std::string eval_name;  // "test" or "validation"
};

void check_combination(const Config& cfg);
DataSplits make_data(const Config& cfg);
std::shared_ptr<nn::Module> make_model(const Config& cfg);
std::unique_ptr<optim::Optimizer> make_optimizer(const Config& cfg, nn::Module& model);
// The same optimizer over any named tensors (a parameter server's slice of the model).
std::unique_ptr<optim::Optimizer> make_optimizer(const Config& cfg, optim::NamedParams params);
std::unique_ptr<optim::LrSchedule> make_schedule(const Config& cfg, int64_t total_steps);

}  // namespace cohort::train
