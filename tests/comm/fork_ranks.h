#pragma once
// Runs one real process per rank for multi-process tests: forks fn(rank) for every rank and
// returns their exit codes (128 + signal when killed). A rank that throws exits with
// `threw_code`; ranks still running after `deadline` are killed and report `timeout_code`.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace cohort::comm::testing {

inline std::vector<int> fork_ranks(int world, const std::function<int(int)>& fn, int threw_code,
                                   int timeout_code,
                                   std::chrono::seconds deadline = std::chrono::seconds(30)) {
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = threw_code;
      try {
        code = fn(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d threw: %s\n", r, e.what());
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(pids.size(), timeout_code);
  auto until = std::chrono::steady_clock::now() + deadline;
  for (size_t left = pids.size(); left > 0 && std::chrono::steady_clock::now() < until;) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (pids[i] != 0 && ::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pids[i] = 0;
        --left;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (pid_t pid : pids) {
    if (pid == 0) continue;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  return codes;
}

}  // namespace cohort::comm::testing
