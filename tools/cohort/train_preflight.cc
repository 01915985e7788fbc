#include "tools/cohort/train_preflight.h"

#include <algorithm>

#include "cohort/core/error.h"
#include "cohort/parallel/mesh.h"
#include "cohort/parallel/strategy_registry.h"
#include "cohort/train/components.h"
#include "cohort/train/elastic.h"
#include "tools/cohort/parse_errors.h"

namespace cohort::cli {

void check_strategy_name(const Config& cfg) {
  // The registry is complete here: the config was loaded, which declared every strategy's keys
  // (and registered "ps"); a program's own strategies were registered before that.
  const std::string& name = cfg.get_string("parallel.strategy");
  const std::vector<std::string> names = parallel::strategy_names();
  if (std::find(names.begin(), names.end(), name) != names.end()) return;
  std::string choices;
  for (const std::string& n : names) choices += (choices.empty() ? "" : ", ") + n;
  const std::string guess = closest_word(name, names);
  throw InvalidArgument(detail::str("config: parallel.strategy = \"", name, "\" is not a strategy",
                                    guess.empty() ? "" : " (did you mean \"" + guess + "\"?)",
                                    "; choose one of: ", choices));
}

// A sequential model's layer list is checked against the data's shape here, once, rather than
// by every worker at start-up. Only where the shape is known without reading the user's files
// (the built-in data sets and text): a large CSV or image folder is read by the workers anyway.
void check_sequential_model(const Config& cfg) {
  if (cfg.get_string("model.type") != "sequential") return;
  const std::string& dataset = cfg.get_string("data.dataset");
  if (dataset == "fashion_mnist" || dataset == "synthetic" || dataset == "text")
    train::make_model(cfg);
}

void check_config_before_launch(const Config& cfg, int workers) {
  check_strategy_name(cfg);
  train::check_combination(cfg);
  train::check_elastic_config(cfg);
  check_sequential_model(cfg);
  parallel::resolve_mesh({int(cfg.get_int("parallel.dp")), int(cfg.get_int("parallel.pp")),
                          int(cfg.get_int("parallel.tp"))},
                         workers);
}

}  // namespace cohort::cli
