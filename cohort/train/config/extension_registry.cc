#include "cohort/train/config/extension_registry.h"

#include "cohort/core/error.h"

#include <map>
#include <mutex>
#include <set>

namespace cohort::train {
namespace {

const std::set<std::string> kBuiltinModels = {"mlp", "cnn", "gpt", "sequential"};
const std::set<std::string> kBuiltinDatasets = {"fashion_mnist", "text",  "synthetic",
                                                "csv",           "numpy", "image_folder"};

// One registry per kind (models, data sets): the same rules for both.
template <typename Registration>
struct Registry {
  const char* kind;  // "model", "dataset"
  const std::set<std::string>* builtin;
  std::mutex mu;
  std::map<std::string, Registration> entries;
  bool keys_declared = false;

  void add(Registration r) {
    std::lock_guard<std::mutex> lock(mu);
    const std::string& name = r.name;
    COHORT_CHECK_ARG(!name.empty(), "register_", kind, ": empty name");
    COHORT_CHECK_ARG(r.make != nullptr, "register_", kind, ": '", name, "' has no factory (make)");
    COHORT_CHECK_ARG(!builtin->count(name) && !entries.count(name), "register_", kind, ": '", name,
                     "' is already a ", kind, " (built in or registered)");
    COHORT_CHECK_ARG(!keys_declared, "register_", kind, ": '", name,
                     "' registered after the configuration keys were declared; register at the "
                     "start of main, before reading any config");
    entries.emplace(name, std::move(r));
  }
  std::vector<std::string> names() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    for (const auto& [name, r] : entries) out.push_back(name);
    return out;
  }
  void declare(ConfigRegistry& keys) {
    std::lock_guard<std::mutex> lock(mu);
    keys_declared = true;
    for (auto& [name, r] : entries)
      if (r.add_keys) r.add_keys(keys);
  }
  // The factory of `name`, copied out so that it runs without the lock; null if unknown.
  decltype(Registration::make) find(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = entries.find(name);
    return it == entries.end() ? nullptr : it->second.make;
  }
};

Registry<ModelRegistration>& models() {
  static Registry<ModelRegistration> r{"model", &kBuiltinModels};
  return r;
}

Registry<DatasetRegistration>& datasets() {
  static Registry<DatasetRegistration> r{"dataset", &kBuiltinDatasets};
  return r;
}

}  // namespace

void register_model(ModelRegistration registration) {
  models().add(std::move(registration));
}
void register_dataset(DatasetRegistration registration) {
  datasets().add(std::move(registration));
}
std::vector<std::string> registered_models() {
  return models().names();
}
std::vector<std::string> registered_datasets() {
  return datasets().names();
}

void declare_extension_keys(ConfigRegistry& r) {
  models().declare(r);
  datasets().declare(r);
}

decltype(ModelRegistration::make) model_factory(const std::string& name) {
  return models().find(name);
}

decltype(DatasetRegistration::make) dataset_factory(const std::string& name) {
  return datasets().find(name);
}

}  // namespace cohort::train
