// `cohort train CONFIG.toml [--set key=value]...`: trains on this process.
#include <memory>

#include "cohort/train/train_config.h"
#include "cohort/train/trainer.h"
#include "tools/cohort/commands.h"

namespace cohort::cli {

void add_train_command(CLI::App& app, Handlers& h) {
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a TOML config");
  auto path = std::make_shared<std::string>();
  auto sets = std::make_shared<std::vector<std::string>>();
  cmd->add_option("config", *path, "TOML config file (see docs/config.md)")->required();
  cmd->add_option("--set", *sets, "Override a key, e.g. --set optim.lr=0.1 (repeatable)");
  cmd->callback([&h, path, sets] {
    h.run = [path, sets] {
      Config cfg = train::load_config(*path, *sets, train::environment_snapshot());
      train::Trainer trainer(cfg);
      trainer.run();
      return 0;
    };
  });
}

}  // namespace cohort::cli
