// `cohort config docs`: prints docs/config.md from the registry.
// `cohort config show CONFIG [--set k=v]`: prints the resolved config as TOML.
#include <cstdio>
#include <memory>

#include "cohort/train/config/train_config.h"
#include "tools/cohort/commands.h"

namespace cohort::cli {

void add_config_command(CLI::App& app, Handlers& h) {
  CLI::App* cmd = app.add_subcommand("config", "Show the config reference or a resolved config");
  cmd->require_subcommand(1);
  CLI::App* docs = cmd->add_subcommand("docs", "Print the Markdown reference of every key");
  docs->callback([&h] {
    h.run = [] {
      std::printf("%s", train::config_reference_markdown().c_str());
      return 0;
    };
  });
  auto path = std::make_shared<std::string>();
  auto sets = std::make_shared<std::vector<std::string>>();
  CLI::App* show = cmd->add_subcommand("show", "Print the resolved config as TOML");
  show->add_option("config", *path, "TOML config file")->required();
  show->add_option("--set", *sets, "Override a key: --set optim.lr=0.1");
  show->callback([&h, path, sets] {
    h.run = [path, sets] {
      Config cfg = train::load_config(*path, *sets, train::environment_snapshot());
      std::printf("%s", cfg.to_toml().c_str());
      return 0;
    };
  });
}

}  // namespace cohort::cli
