#pragma once
// One worker process as the launcher sees it: fork + execvp with its stdout/stderr on pipes,
// in its own process group, dying with the launcher (PR_SET_PDEATHSIG). Internal to launch/.
#include <sys/types.h>

#include <string>
#include <vector>

namespace cohort::launch::detail {

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH (execvp)
  std::vector<std::string> env;   // the complete environment, "KEY=VALUE" each
  int cpu = -1;                   // >= 0: pin the child to this CPU (binding.h)
};

struct ChildProcess {
  pid_t pid = -1;   // also its process group id
  int out_fd = -1;  // read end of its stdout pipe, non-blocking, close-on-exec
  int err_fd = -1;  // read end of its stderr pipe, non-blocking, close-on-exec
};

// Forks and execs. Everything the child touches is prepared before fork(), because after a
// fork in a threaded process (the store server runs a thread) the child may only make
// async-signal-safe calls. If exec fails the child writes the reason to its stderr and exits
// 127. IoError if pipes or fork fail.
ChildProcess spawn_child(const SpawnSpec& spec);

// Sends sig to the child's whole process group. Returns false if the group is gone (ESRCH).
bool signal_group(pid_t pgid, int sig);

// "SIGKILL" for 9, "SIG?" for an unknown number.
std::string signal_name(int sig);
// "exit code 3" or "signal 9 (SIGKILL)" from a waitpid status.
std::string describe_status(int status);
// 0 for a clean exit, the exit code, or 128 + signal.
int exit_code_of(int status);

}  // namespace cohort::launch::detail
