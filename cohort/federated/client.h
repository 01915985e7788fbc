#pragma once
// FlClient: one federated client. It connects to the server (retrying while it is not up, and
// again after losing it, for reconnect_timeout), says hello with its model's layout, then
// serves the server's tasks until the server says bye: train locally from the global model
// (LocalTrainFn), send the delta; under secure aggregation, take part in the four phases of
// secagg.h (advertise keys -> share them -> masked input -> unmasking shares), training when
// the shares have arrived. A task for a newer round abandons an unfinished one. A refusal from
// the server (a late update, another model) is logged and the client goes on with the next
// task; another model is fatal (InvalidArgument), as the server will refuse every hello.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "cohort/federated/messages.h"
#include "cohort/net/service/client.h"

namespace cohort::federated {

struct LocalResult {
  std::vector<float> delta;  // the local model minus the task's global model
  uint64_t num_samples = 0;  // samples seen (the aggregation weight)
  double loss = 0;           // mean training loss of the local steps
};
// Trains from task.params with task.settings (lr, mu, epochs or steps).
using LocalTrainFn = std::function<LocalResult(const Task& task)>;

struct FlClientOptions {
  net::service::ClientOptions service;  // host, port, secret, tls; name "federated server"
  uint32_t id = 0;
  uint64_t num_samples = 0;  // told at hello
  ps::Layout layout;
  std::chrono::milliseconds reconnect_timeout{std::chrono::seconds(60)};
  std::chrono::milliseconds poll{200};  // how often a waiting client checks stop()
  // Fault seam (tests): after sending this secure phase's message the client stops (closes its
  // connection and returns from run()), as a client that dies mid-round.
  std::optional<SecAggPhase> stop_after;
};

struct ClientSummary {
  int rounds = 0;    // updates (or masked inputs) sent
  int refused = 0;   // messages the server refused
  bool bye = false;  // the server ended training (false: stopped or the fault seam)
};

class FlClient {
 public:
  FlClient(FlClientOptions options, LocalTrainFn train);
  ~FlClient();
  // Serves until bye, stop() or the fault seam. Timeout when the server cannot be reached for
  // reconnect_timeout; InvalidArgument when it refuses our hello (another model).
  ClientSummary run();
  void stop() { stop_ = true; }  // any thread

  struct RoundState;

 private:
  bool connect_and_hello();  // false when the server is not reachable (yet)
  // Serves one connection; returns when it ends (IoError inside), bye, stop or the seam.
  void serve(ClientSummary& summary);
  void on_task(Task task, ClientSummary& summary);
  void on_secagg(const SecAggMsg& m, ClientSummary& summary);
  // Sends a request; a refusal is logged and counted, false then.
  bool send(const Bytes& payload, const char* what, ClientSummary& summary);
  LocalResult train(const Task& task);
  std::vector<uint64_t> secure_input(const LocalResult& r, const TaskSettings& s) const;

  FlClientOptions options_;
  LocalTrainFn train_;
  std::unique_ptr<net::service::Client> client_;
  std::unique_ptr<RoundState> round_;  // the secure round in progress
  std::atomic<bool> stop_{false};
  bool done_ = false;  // bye, or the fault seam fired
};

}  // namespace cohort::federated
