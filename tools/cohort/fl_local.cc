#include "tools/cohort/fl_local.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/launch/launcher.h"
#include "cohort/net/pki.h"
#include "cohort/train/config/train_config.h"
#include "cohort/train/roles/federated_common.h"

extern char** environ;

namespace cohort::cli {
namespace {

using Clock = std::chrono::steady_clock;

pid_t spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  COHORT_CHECK_IO(rc == 0, "cohort fl run: cannot start ", args[0], ": ", std::strerror(rc));
  return pid;
}

// The server's "host:port" once it wrote it; IoError if the server exits first.
std::string wait_for_address(const std::string& file, pid_t server) {
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (Clock::now() < deadline) {
    std::ifstream f(file);
    std::string address;
    if (f >> address) return address;
    int status = 0;
    COHORT_CHECK_IO(waitpid(server, &status, WNOHANG) == 0,
                    "cohort fl run: the server exited before listening (see its output above)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(server, SIGKILL);
  COHORT_CHECK_T(false, Timeout, "cohort fl run: the server did not write ", file, " in 120 s");
  return {};
}

int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int run_local_federation(const std::string& config, std::vector<std::string> sets, int clients) {
  sets.push_back("fl.clients=" + std::to_string(clients));
  const Config cfg = train::load_config(config, sets, train::environment_snapshot());
  train::fl::check_federated_config(cfg);  // before any key, server or client is made
  const std::filesystem::path run_dir =
      std::filesystem::path(cfg.get_string("run.dir")) / cfg.get_string("run.name");
  std::filesystem::create_directories(run_dir);
  if (cfg.get_string("fl.keys").empty()) {
    const std::string keys = (run_dir / "keys").string();
    std::filesystem::remove_all(keys);  // a fresh CA and secret for every local job
    net::write_job_pki(keys, {.clients = clients});
    write_secret_file(keys);
    sets.push_back("fl.keys=" + keys);
  }
  const std::string self = launch::self_executable();
  const std::string address_file = (run_dir / "server.addr").string();
  std::filesystem::remove(address_file);
  std::vector<std::string> server_args = {self,        "fl", "server", config, "--address-file",
                                          address_file};
  for (const std::string& s : sets) server_args.insert(server_args.end(), {"--set", s});
  const pid_t server = spawn(server_args);
  const std::string address = wait_for_address(address_file, server);
  std::vector<pid_t> kids;
  for (int i = 0; i < clients; ++i) {
    std::vector<std::string> args = {self,       "fl",    "client",      config,
                                     "--server", address, "--client-id", std::to_string(i)};
    for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
    kids.push_back(spawn(args));
  }
  int status = 0;
  waitpid(server, &status, 0);
  // Clients of a server that failed have nobody to train for: stop them now rather than let
  // them look for it until their reconnect timeout. After a clean end they get 30 s to leave.
  if (exit_code(status) != 0)
    for (pid_t kid : kids) kill(kid, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (pid_t kid : kids) {
    int s = 0;
    while (waitpid(kid, &s, WNOHANG) == 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (Clock::now() >= deadline) {
      kill(kid, SIGKILL);
      waitpid(kid, &s, 0);
    }
  }
  if (exit_code(status) != 0)
    std::fprintf(stderr, "cohort fl run: the server failed (exit code %d)\n", exit_code(status));
  return exit_code(status);
}

}  // namespace cohort::cli
