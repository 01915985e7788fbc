#include "cohort/comm/transport/shm/single_copy.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "cohort/core/error.h"

namespace cohort::comm::transport {

int read_remote(pid_t pid, uint64_t remote, void* local, size_t bytes) {
  auto* dst = static_cast<char*>(local);
  while (bytes > 0) {
    iovec l{dst, bytes};
    iovec r{reinterpret_cast<void*>(remote), bytes};
    ssize_t n = ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EFAULT;  // nothing readable at that address: the mapping went away
    // A partial read stops at a page the kernel could not pin; try the rest.
    dst += n;
    remote += uint64_t(n);
    bytes -= size_t(n);
  }
  return 0;
}

bool probe_remote_read(pid_t pid, uint64_t remote, uint64_t expected, std::string* why) {
  uint64_t got = 0;
  int err = read_remote(pid, remote, &got, sizeof(got));
  if (err != 0) {
    *why = detail::str("process_vm_readv from pid ", pid, ": ", std::strerror(err),
                       err == EPERM ? " (ptrace access denied: kernel.yama.ptrace_scope?)" : "");
    return false;
  }
  if (got != expected) {
    *why = detail::str("process_vm_readv from pid ", pid, " read 0x", std::hex, got,
                       " instead of the segment magic");
    return false;
  }
  return true;
}

}  // namespace cohort::comm::transport
