#pragma once
// ParamServer: one of S parameter servers. It owns keys `range` of the flat key space
// (partition.h) with their values and the optimizer state over them, and serves workers on a
// service::Server (comm/service/server.h), authenticated with the job secret.
//
// BSP protocol (protocol.h has the messages):
//   1. every worker says hello; its layout must equal the server's (else the hello is refused
//      naming the first differing parameter and the worker's rank), and its job size too;
//   2. a worker pulls the current values (the initial ones: workers start from the servers);
//   3. step t: each worker pushes its gradient of the range for step t; the server keeps the
//      request unanswered until all N pushes of step t arrived, then sets their average (summed
//      in rank order: the same whatever the arrival order) as the gradient of its slice,
//      applies the LR schedule at step t and the optimizer, and answers every pending push
//      with the new values. A push of the wrong range or size, for another
//      step, or twice in a step is refused naming the worker and the range.
//   4. each worker says bye; wait() returns once all N did.
// A worker that leaves without bye makes wait() throw naming it.
//
// Threads: the handlers run on the service loop thread; wait() on the caller's. State is under
// mu_. The update (an elementwise optimizer over the slice) runs on the loop thread.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "cohort/comm/service/server.h"
#include "cohort/optim/optimizer.h"
#include "cohort/optim/schedule.h"
#include "cohort/ps/protocol.h"

namespace cohort::ps {

using Millis = std::chrono::milliseconds;

struct ServerOptions {
  int index = 0;  // this server: 0..num_servers-1
  int num_servers = 1;
  int num_workers = 1;
  NamedTensors params;  // the model's parameters with their initial values (only read)
  rendezvous::Secret secret;
  rendezvous::SecretPolicy secret_policy = rendezvous::SecretPolicy::kRequired;
  std::string host = "127.0.0.1";
  // The optimizer over the server's slice (one 1-D tensor), and the LR schedule given the
  // run's length from the workers' hello.
  std::function<std::unique_ptr<optim::Optimizer>(optim::NamedParams)> make_optimizer;
  std::function<std::unique_ptr<optim::LrSchedule>(int64_t total_steps)> make_schedule;
};

class ParamServer {
 public:
  // Starts serving. InvalidArgument for bad options (e.g. more servers than keys).
  explicit ParamServer(ServerOptions options);
  ~ParamServer();
  ParamServer(const ParamServer&) = delete;
  ParamServer& operator=(const ParamServer&) = delete;

  // Returns once every worker said bye. InvalidArgument naming the worker if one left without
  // it; Timeout if no request came for `idle_timeout`.
  void wait(Millis idle_timeout);

  const std::string& address() const;
  KeyRange range() const { return range_; }
  int64_t step() const;

 private:
  struct Pending {
    uint64_t peer;
    uint64_t request_id;
  };
  std::optional<Bytes> on_request(const comm::service::Peer& peer, uint64_t id, Bytes payload);
  void on_leave(const comm::service::Peer& peer, const std::string& why);
  Bytes hello(uint64_t peer, const Bytes& payload);
  std::optional<Bytes> push(uint64_t peer, uint64_t id, const Bytes& payload);
  void apply_update();  // all pushes of step_ are in: average, optimize, answer them
  int rank_of(uint64_t peer, int32_t claimed) const;
  std::string who() const;

  ServerOptions o_;
  Layout layout_;
  KeyRange range_;
  Tensor shard_;  // 1-D f32 [range_.size()]: the values this server owns
  std::unique_ptr<optim::Optimizer> opt_;
  std::unique_ptr<optim::LrSchedule> schedule_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::map<uint64_t, int> ranks_;  // peer -> worker rank, after its hello
  std::set<int> said_bye_;
  // rank -> its gradient of step_, kept until all arrived so that they are summed in rank
  // order: the result does not depend on arrival order (determinism, DESIGN.md).
  std::vector<std::vector<float>> grads_;
  std::map<int, Pending> pushed_;  // rank -> its unanswered push of step_
  int64_t step_ = 0;
  std::string error_;  // set once: wait() throws it
  std::chrono::steady_clock::time_point last_activity_;

  std::unique_ptr<comm::service::Server> server_;  // last: stopped first
};

}  // namespace cohort::ps
