#pragma once
// PsWorker: a worker's connections to the S parameter servers of its job (server.h).
// It finds each server's address in the rendezvous store (server_key), connects with the job
// secret, and says hello with its model's layout; a server with another model refuses it, and
// the constructor throws that refusal (which names the first differing parameter).
//
// push_pull() sends every server its range of the gradient at once (one request per server,
// all in flight before waiting for any) and writes back the values each server answers once
// the server answers (BSP: the step's update is applied; SSP: the slowest worker is close
// enough). Every wait has the deadline `timeout`; an error names the
// server ("parameter server 1 at 127.0.0.1:41234").
#include <chrono>
#include <memory>
#include <vector>

#include "cohort/comm/service/client.h"
#include "cohort/ps/consistency.h"
#include "cohort/ps/protocol.h"
#include "cohort/rendezvous/store.h"

namespace cohort::ps {

using Millis = std::chrono::milliseconds;

struct WorkerOptions {
  int rank = 0;
  int num_workers = 1;
  int num_servers = 1;
  std::shared_ptr<rendezvous::Store> store;  // where the servers published their addresses
  rendezvous::Secret secret;
  rendezvous::SecretPolicy secret_policy = rendezvous::SecretPolicy::kRequired;
  Millis timeout = std::chrono::seconds(300);  // find, connect, and each request
  int64_t total_steps = 0;                     // sent in hello, for the servers' LR schedule
  Consistency consistency;                     // the servers' mode (the worker reports it)
};

struct TransferStats {
  uint64_t bytes_sent = 0, bytes_received = 0;
  // push_pull: over the servers, the largest staleness, lead and hold, and whether any server
  // dropped the push (BSP with backup workers).
  PushReply reply;
};

class PsWorker {
 public:
  // Connects to every server and says hello. Timeout naming the server that did not publish
  // its address or answer; InvalidArgument with the server's refusal.
  PsWorker(WorkerOptions options, Layout layout);
  ~PsWorker();
  PsWorker(const PsWorker&) = delete;
  PsWorker& operator=(const PsWorker&) = delete;

  // Every key's current value into flat[0, layout.total).
  TransferStats pull(float* flat);
  // Pushes grads[range_i] to server i for `step`, and writes the updated values into values.
  TransferStats push_pull(int64_t step, const float* grads, float* values);
  // Tells every server this worker is done; errors are logged, not thrown.
  void bye() noexcept;
  // Closes the connections without goodbye (the worker is failing): the servers then name it
  // as a worker that left without saying goodbye.
  void abandon() noexcept;

  const std::vector<KeyRange>& ranges() const { return ranges_; }

 private:
  // Runs f(i) for every server, all at once (server 0 on the calling thread, every other on
  // its own persistent thread); rethrows the first error (by server index) once all are done.
  template <typename F>
  void on_every_server(F f);
  class ServerThreads;  // worker.cc: the persistent threads of servers 1..S-1

  WorkerOptions o_;
  Layout layout_;
  std::vector<KeyRange> ranges_;
  std::vector<std::unique_ptr<comm::service::Client>> clients_;
  bool said_bye_ = false;
  // Started by the first on_every_server with more than one server; a thread per server per
  // step used to be created and joined instead. Declared last: stopped before the clients go.
  std::unique_ptr<ServerThreads> threads_;
};

}  // namespace cohort::ps
