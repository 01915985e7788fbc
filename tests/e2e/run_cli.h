#pragma once
// Runs the real `cohort` binary (COHORT_BIN, set by tests/e2e/CMakeLists.txt) as a user would,
// capturing its exit status and its stdout and stderr together.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace cohort::testing {

struct CliResult {
  int status = -1;     // exit status, or 128 + signal
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, capturing stdout and stderr together.
inline CliResult run_shell(const std::string& command) {
  std::string cmd = command + " 2>&1";
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

inline CliResult run_cli(const std::string& args) {
  return run_shell(std::string(COHORT_BIN) + " " + args);
}

}  // namespace cohort::testing
