#include "cohort/launch/child_process.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "cohort/core/error.h"

namespace cohort::launch::detail {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Async-signal-safe write of a whole buffer (used in the child after fork).
void write_all_raw(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(pid_t launcher, int out_w, int err_w, int null_fd, char** argv,
                             char** envp, const char* fail_msg, size_t fail_len,
                             const cpu_set_t* cpus) {
  setpgid(0, 0);
  if (cpus) sched_setaffinity(0, sizeof(*cpus), cpus);  // best effort: unpinned still works
  // Die with the launcher; if it already died before prctl took effect, we were reparented.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(127);
  // SIGINT/SIGTERM are blocked (see spawn_child): reset the launcher's handlers, which write
  // to the launcher's self-pipe, before a signal meant for this worker can run them. Then
  // unblock everything (the mask survives exec); a pending signal now acts as the default.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE}) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (dup2(null_fd, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0) _exit(127);
  environ = envp;
  execvp(argv[0], argv);
  int err = errno;
  write_all_raw(2, fail_msg, fail_len);
  const char* why = err == ENOENT   ? "no such file or directory\n"
                    : err == EACCES ? "permission denied\n"
                                    : "exec failed\n";
  write_all_raw(2, why, strlen(why));
  _exit(127);
}

}  // namespace

ChildProcess spawn_child(const SpawnSpec& spec) {
  COHORT_CHECK_ARG(!spec.argv.empty(), "spawn_child: empty command");
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string fail_msg = "cohort run: cannot execute '" + spec.argv[0] + "': ";
  cpu_set_t cpus;  // prepared before fork: the child may only make async-signal-safe calls
  CPU_ZERO(&cpus);
  if (spec.cpu >= 0 && spec.cpu < CPU_SETSIZE) CPU_SET(spec.cpu, &cpus);

  int out[2] = {-1, -1}, err[2] = {-1, -1};
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  bool ok = null_fd >= 0 && ::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0;
  if (!ok) {
    int e = errno;
    for (int* fd : {&null_fd, &out[0], &out[1], &err[0], &err[1]}) close_fd(*fd);
    throw IoError(cohort::detail::str("cohort run: cannot create pipes for '", spec.argv[0],
                                      "': ", strerror(e)));
  }
  const pid_t launcher = ::getpid();
  // Block SIGINT/SIGTERM across fork: the child inherits the launcher's handlers, and a
  // SIGTERM sent to the worker before it reset them would land in the launcher's self-pipe,
  // as if the launcher itself had been asked to stop.
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  pid_t pid = ::fork();
  if (pid == 0) {
    exec_child(launcher, out[1], err[1], null_fd, argv.data(), envp.data(), fail_msg.data(),
               fail_msg.size(), spec.cpu >= 0 ? &cpus : nullptr);
  }
  int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  close_fd(out[1]);
  close_fd(err[1]);
  close_fd(null_fd);
  if (pid < 0) {
    close_fd(out[0]);
    close_fd(err[0]);
    throw IoError(cohort::detail::str("cohort run: fork failed for '", spec.argv[0],
                                      "': ", strerror(fork_errno)));
  }
  // Also set the group from the parent, so that a signal sent right after spawn_child returns
  // reaches the group even if the child has not run setpgid yet. EACCES (already exec'ed) is
  // harmless: the child did it itself.
  setpgid(pid, pid);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  return ChildProcess{pid, out[0], err[0]};
}

bool signal_group(pid_t pgid, int sig) {
  if (pgid <= 0) return false;
  return ::kill(-pgid, sig) == 0;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : std::string("SIG?");
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return cohort::detail::str("signal ", sig, " (", signal_name(sig), ")");
  }
  return cohort::detail::str("exit code ", WEXITSTATUS(status));
}

int exit_code_of(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace cohort::launch::detail
