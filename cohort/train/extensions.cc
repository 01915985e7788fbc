#include "cohort/train/extensions.h"

namespace cohort::train {

bool is_registered_model(const std::string& name) {
  return model_factory(name) != nullptr;
}
bool is_registered_dataset(const std::string& name) {
  return dataset_factory(name) != nullptr;
}

std::shared_ptr<nn::Module> make_registered_model(const std::string& name, const Config& cfg,
                                                  const ModelInputs& inputs) {
  auto make = model_factory(name);
  COHORT_CHECK_ARG(make != nullptr, "model.type: '", name, "' is not registered");
  std::shared_ptr<nn::Module> model = make(cfg, inputs);
  COHORT_CHECK_ARG(model != nullptr, "model.type '", name, "': its factory returned no model");
  return model;
}

DataSplits make_registered_dataset(const std::string& name, const Config& cfg) {
  auto make = dataset_factory(name);
  COHORT_CHECK_ARG(make != nullptr, "data.dataset: '", name, "' is not registered");
  DataSplits d = make(cfg);
  COHORT_CHECK_ARG(d.train && d.eval, "data.dataset '", name,
                   "': its factory must return both a training and an evaluation split");
  COHORT_CHECK_ARG(d.is_text || (!d.inputs.sample_shape.empty() && d.inputs.classes >= 2),
                   "data.dataset '", name,
                   "': its factory must fill inputs (the sample shape and >= 2 classes)");
  return d;
}

}  // namespace cohort::train
