#pragma once
// The registries behind train/extensions.h (read that header: it is the one a program uses).
// They live at the config level, below train/, because the config registry reads their names
// (model.type's and data.dataset's choices) and declares their keys; the factories are only
// stored here and called by train/ (train/extensions.h).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/config.h"

namespace cohort::nn {
class Module;
}

namespace cohort::train {

struct ModelInputs;  // train/components.h
struct DataSplits;

struct ModelRegistration {
  std::string name;
  std::string description;                        // one line, for docs and errors
  std::function<void(ConfigRegistry&)> add_keys;  // the model's own section; may be empty
  std::function<std::shared_ptr<nn::Module>(const Config&, const ModelInputs&)> make;
};

struct DatasetRegistration {
  std::string name;
  std::string description;
  std::function<void(ConfigRegistry&)> add_keys;
  std::function<DataSplits(const Config&)> make;  // train, eval, eval_name and inputs
};

void register_model(ModelRegistration registration);
void register_dataset(DatasetRegistration registration);

// For the trainer and the config registry: the registered names (sorted); each one's keys
// declared (once; no registration after that); a factory (empty when `name` is not registered).
std::vector<std::string> registered_models();
std::vector<std::string> registered_datasets();
void declare_extension_keys(ConfigRegistry& r);
decltype(ModelRegistration::make) model_factory(const std::string& name);
decltype(DatasetRegistration::make) dataset_factory(const std::string& name);

}  // namespace cohort::train
