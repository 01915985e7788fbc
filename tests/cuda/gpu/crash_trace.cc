// On SIGSEGV/SIGBUS/SIGABRT, prints the stack (function names: the binary links with
// ENABLE_EXPORTS) before dying, so a crash on the GPU machine, where there is no debugger, names
// where it happened in the log scripts/gpu-check.sh brings back.
#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <initializer_list>

namespace {

void print_stack_and_die(int sig) {
  static const char kHeader[] = "\n*** cohort_cuda_kernel_tests: fatal signal; stack:\n";
  (void)!write(STDERR_FILENO, kHeader, sizeof(kHeader) - 1);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

const bool installed = [] {
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE}) std::signal(sig, print_stack_and_die);
  return true;
}();

}  // namespace
