#pragma once
// Runs the real `cohort` binary (COHORT_BIN, set by tests/e2e/CMakeLists.txt) as a user would,
// capturing its exit status and its stdout and stderr together.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

// True when the command's output holds `s`.
inline bool contains(const CliResult& r, const std::string& s) {
  return r.output.find(s) != std::string::npos;
}

inline CliResult run_cli(const std::string& args) {
  return run_shell(std::string(COHORT_BIN) + " " + args);
}

// A port the OS just handed out and took back: the tests' stand-in for a known master port
// (multi-node runs of two launchers on loopback).
inline int free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace cohort::testing
