#pragma once
// A `cohort` command running in the background (a dashboard, a job), its output in a file, and
// the page it serves as headless Chromium (Debian's chromium-headless-shell) renders it: for
// the tests of the live dashboard and of `cohort dashboard RUN_DIR...`.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "tests/e2e/run_cli.h"
#include "tests/support/files.h"

namespace cohort::testing {

inline constexpr const char* kBrowser = "/usr/bin/chromium-headless-shell";

// `cohort ARGS` in its own process group; stopped (SIGTERM to the group) when destroyed.
// `prefix` runs it under another command (e.g. "ip netns exec NS").
class BackgroundJob {
 public:
  BackgroundJob(const std::string& args, const std::filesystem::path& out,
                const std::string& prefix = "")
      : out_(out) {
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      const std::string cmd = "exec " + prefix + " " + std::string(COHORT_BIN) + " " + args +
                              " > " + out.string() + " 2>&1";
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~BackgroundJob() {
    if (pid_ > 0) kill(-pid_, SIGTERM);
    wait_exit();
  }
  // The first match of `pattern`'s group 1 in the output, or "" after 30 s.
  std::string wait_for(const std::string& pattern) const {
    const std::regex re(pattern);
    for (int i = 0; i < 300; ++i) {
      std::smatch m;
      std::string text = output();
      if (std::regex_search(text, m, re)) return m[1];
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "";
  }
  // The dashboard's address from the line that prints it, or "" after 30 s.
  std::string wait_for_url() const { return wait_for(R"(dashboard at (http://[0-9.:]+/))"); }
  // Sends `sig` to the command (not its group) and returns its exit status (128 + signal when
  // the signal killed it), or -1 when it has not ended within 10 s.
  int stop(int sig) {
    kill(pid_, sig);
    return wait_exit_within(std::chrono::seconds(10));
  }
  // Waits for the command to end by itself: its exit status, or -1 after `within`.
  int wait_exit_within(std::chrono::seconds within) {
    const auto until = std::chrono::steady_clock::now() + within;
    while (pid_ > 0 && std::chrono::steady_clock::now() < until) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }
  std::string output() const { return read_bytes(out_.string()); }

 private:
  void wait_exit() {
    int st = 0;
    if (pid_ > 0) waitpid(pid_, &st, 0);
  }

  pid_t pid_ = -1;
  std::filesystem::path out_;
};

// The page as the browser has it after its script ran.
inline std::string dump_dom(const std::string& url) {
  return run_shell(std::string("timeout 60 ") + kBrowser +
                   " --no-sandbox --headless --disable-gpu "
                   "--virtual-time-budget=2500 --dump-dom '" +
                   url + "' 2>/dev/null")
      .output;
}

// A screenshot of the page (1280 wide), or a test failure naming the file.
inline void screenshot(const std::string& url, const std::filesystem::path& png, int height) {
  run_shell(std::string("timeout 60 ") + kBrowser +
            " --no-sandbox --headless --disable-gpu --virtual-time-budget=2500"
            " --window-size=1280," +
            std::to_string(height) + " --screenshot=" + png.string() + " '" + url + "'");
}

}  // namespace cohort::testing
