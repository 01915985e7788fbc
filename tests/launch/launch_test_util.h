#pragma once
// Helpers for tests/launch: waiting for the files the workers write, checking that a process
// is gone, and running code in a forked child (for tests that need their own
// environment or must signal the launcher).
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/files.h"

namespace cohort::testing {

inline std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Waits (deadline) until every file exists and is non-empty; returns whether they all did.
inline bool wait_for_files(const std::vector<std::string>& paths,
                           std::chrono::milliseconds deadline = std::chrono::seconds(5)) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  for (const auto& p : paths) {
    while (trim(read_bytes(p)).empty()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return true;
}

inline pid_t read_pid(const std::string& path) {
  return static_cast<pid_t>(std::stol(trim(try_read_bytes(path).value_or("-1"))));
}

// True if pid is gone, or a zombie waiting for an init that is slow to reap orphans (it can
// no longer run). Waits up to `deadline` for that to become true.
inline bool process_gone(pid_t pid, std::chrono::milliseconds deadline = std::chrono::seconds(2)) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    auto stat = read_bytes("/proc/" + std::to_string(pid) + "/stat");
    size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') {
      return true;
    }
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Forks; the child runs fn and _exits with its return value (99 if it threw). Returns the
// child's pid.
inline pid_t fork_child(const std::function<int()>& fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int code = 99;
    try {
      code = fn();
    } catch (...) {
    }
    ::_exit(code);
  }
  return pid;
}

// Waits for a child with a deadline; exit code, 128 + signal, or -1 on timeout (then the
// child is killed and reaped).
inline int wait_child(pid_t pid, std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace cohort::testing
