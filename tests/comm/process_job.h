#pragma once
// A job of real processes for multi-process tests (with fork_ranks.h): a TcpStore server in a
// process of its own, the job's secret and transport, and how each rank reaches them.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>

#include "cohort/comm/communicator.h"
#include "cohort/rendezvous/tcp_store.h"
#include "cohort/rendezvous/tcp_store_server.h"
#include "tests/comm/collective_util.h"

namespace cohort::comm::testing {

struct Job {
  int size;
  transport::TransportKind kind;
  net::Secret secret;
  uint16_t store_port;
  size_t single_copy_bytes = transport::DeviceOptions{}.shm_single_copy_bytes;
};

inline std::shared_ptr<rendezvous::Store> connect_store(const Job& job) {
  rendezvous::TcpStoreOptions o;
  o.port = job.store_port;
  o.secret = job.secret;
  o.timeout = std::chrono::seconds(20);
  return std::make_shared<rendezvous::TcpStore>(o);
}

// The test transport's options with the job's secret; collectives time out after `timeout`.
inline CommOptions job_options(const Job& job,
                               std::chrono::milliseconds timeout = std::chrono::seconds(3)) {
  CommOptions o = test_options(job.kind);
  o.device.secret = job.secret;
  o.device.shm_single_copy_bytes = job.single_copy_bytes;
  o.timeout = timeout;
  return o;
}

// The store server runs in a process of its own: forking ranks from a process whose server
// thread may hold a lock (OpenSSL's, the allocator's) at that moment can deadlock the child.
class StoreProcess {
 public:
  explicit StoreProcess(const net::Secret& secret) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      rendezvous::TcpStoreServerOptions so;
      so.secret = secret;
      rendezvous::TcpStoreServer server(so);
      uint16_t port = server.port();
      (void)!::write(fds[1], &port, sizeof(port));
      for (;;) ::pause();  // until the test kills it
    }
    ::close(fds[1]);
    if (::read(fds[0], &port_, sizeof(port_)) != ssize_t(sizeof(port_))) port_ = 0;
    ::close(fds[0]);
  }
  ~StoreProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  StoreProcess(const StoreProcess&) = delete;
  StoreProcess& operator=(const StoreProcess&) = delete;
  uint16_t port() const { return port_; }  // 0: the server did not start

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

}  // namespace cohort::comm::testing
