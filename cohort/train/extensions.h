#pragma once
// Models and data sets of one's own, plugged into `cohort train` with no edit to cohort: a
// program registers them at the start of main, before any config is read, and they become
// values of model.type and data.dataset like the built-in ones (examples/own_model_and_data.cpp):
//
//   train::register_model({
//       .name = "residual_mlp",
//       .description = "an MLP with pre-norm residual blocks",
//       .add_keys = [](ConfigRegistry& r) { r.add({"residual_mlp.depth", ...}); },
//       .make = [](const Config& cfg, const train::ModelInputs& in) { return ...; }});
//   train::register_dataset({.name = "spirals", .description = ..., .make = ...});
//
// A model is built from the config and the data's inputs (one sample's shape and the number
// of classes: train/components.h), so it fits any data set; a data set returns its training
// and evaluation splits with those inputs filled in. The same rules as register_strategy:
// InvalidArgument for an empty, built-in or repeated name, a missing factory, or a call after
// the configuration keys were declared.
#include <memory>
#include <string>

#include "cohort/train/components.h"
#include "cohort/train/config/extension_registry.h"

namespace cohort::train {

bool is_registered_model(const std::string& name);
bool is_registered_dataset(const std::string& name);
// The registered factory's result, checked (a model; both splits and the inputs filled).
std::shared_ptr<nn::Module> make_registered_model(const std::string& name, const Config& cfg,
                                                  const ModelInputs& inputs);
DataSplits make_registered_dataset(const std::string& name, const Config& cfg);

}  // namespace cohort::train
