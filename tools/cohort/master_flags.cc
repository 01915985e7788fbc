#include "tools/cohort/master_flags.h"

namespace cohort::cli {

void add_master_options(CLI::App* cmd, MasterArgs& a, const std::string& master_help) {
  CLI::Option* master = cmd->add_option("--master", a.master, master_help);
  CLI::Option* addr = cmd->add_option("--master-addr,--master_addr", a.addr,
                                      "torchrun's spelling: the ADDR of --master (with "
                                      "--master-port, default 29500)");
  CLI::Option* port = cmd->add_option("--master-port,--master_port", a.port,
                                      "torchrun's spelling: the PORT of --master (with "
                                      "--master-addr, default 127.0.0.1)")
                          ->check(CLI::Range(0, 65535));
  master->excludes(addr);
  master->excludes(port);
}

std::string master_address(const MasterArgs& a) {
  if (!a.master.empty() || (a.addr.empty() && a.port < 0)) return a.master;
  std::string host = a.addr.empty() ? "127.0.0.1" : a.addr;
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  return host + ":" + std::to_string(a.port < 0 ? kTorchrunMasterPort : a.port);
}

}  // namespace cohort::cli
