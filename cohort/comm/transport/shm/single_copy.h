#pragma once
// Single-copy transfers between processes of one host (Linux cross-memory attach,
// process_vm_readv): the receiver copies (or reduces) straight out of the sender's buffer, so
// a large message costs one copy instead of two (into the ring, out of it) and the sender's
// core does no copying at all. Open MPI's vader BTL does the same ("single_copy_mechanism =
// cma"); NCCL's P2P transport reads peer buffers directly for the same reason.
//
// Why not always: the kernel must allow this process to read the peer's memory (same user and
// ptrace access: Yama's ptrace_scope >= 1 forbids it between sibling processes, seccomp may
// forbid the syscall). So each side probes once, by reading a known word of the peer's
// memory, and publishes the answer; a sender uses the single-copy path only towards a peer
// that said it can read it, and the ring otherwise. Both paths give identical results.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace cohort::comm::transport {

// Copies `bytes` from address `remote` of process `pid` to `local`. Returns 0 or an errno.
int read_remote(pid_t pid, uint64_t remote, void* local, size_t bytes);

// Whether this process may read process `pid`'s memory: reads the 8 bytes at `remote` and
// compares them with `expected`. `why` receives the reason when it may not.
bool probe_remote_read(pid_t pid, uint64_t remote, uint64_t expected, std::string* why);

}  // namespace cohort::comm::transport
