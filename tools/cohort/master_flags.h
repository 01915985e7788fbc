#pragma once
// `--master ADDR:PORT`, and torchrun's spelling of it (`--master-addr`/`--master_addr` and
// `--master-port`/`--master_port`), shared by `cohort run` and `cohort train`, so that a
// torchrun command line works with `cohort run` in place of `torchrun` (docs/launch.md).
#include <CLI/CLI.hpp>
#include <string>

namespace cohort::cli {

// torchrun's default port when only --master-addr is given (torchrun --help).
constexpr int kTorchrunMasterPort = 29500;

struct MasterArgs {
  std::string master;  // --master ADDR:PORT
  std::string addr;    // --master-addr
  int port = -1;       // --master-port; -1: not given
};

// Declares the three options on `cmd`; --master excludes the other two (CLI11 reports both
// names when a user gives both).
void add_master_options(CLI::App* cmd, MasterArgs& a, const std::string& master_help);

// The ADDR:PORT for LaunchOptions::master: --master as given, else --master-addr (default
// 127.0.0.1) and --master-port (default 29500, as torchrun) joined, an IPv6 address in
// brackets; empty when none was given (the launcher then picks a free port on loopback).
std::string master_address(const MasterArgs& a);

}  // namespace cohort::cli
