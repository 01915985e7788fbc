#pragma once
// A parameter-server job in one process for the tests: S servers over the model below (SGD at
// kLr), their addresses in a HashStore, and the options of a worker that finds them.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cohort/optim/sgd.h"
#include "cohort/ps/server.h"
#include "cohort/ps/worker.h"
#include "cohort/rendezvous/hash_store.h"

namespace cohort::ps {

using namespace std::chrono_literals;

inline constexpr double kLr = 0.5;

inline NamedTensors model(int64_t second = 3) {
  return {{"w", from_vector({1, 2, 3, 4}, {2, 2})},
          {"b", from_vector(std::vector<float>(size_t(second), 1.0f), {second})}};
}

struct Job {
  explicit Job(int servers, int workers, Consistency c = {}, Millis rejoin = Millis(0),
               bool shared_memory = true)
      : secret(net::Secret::generate()) {
    for (int i = 0; i < servers; ++i) {
      ServerOptions o;
      o.index = i;
      o.num_servers = servers;
      o.num_workers = workers;
      o.params = model();
      o.secret = secret;
      o.consistency = c;
      o.rejoin_timeout = rejoin;
      o.shared_memory = shared_memory;
      o.make_optimizer = [](optim::NamedParams p) {
        return std::make_unique<optim::SGD>(std::move(p), optim::SgdOptions{.lr = kLr});
      };
      o.make_schedule = [](int64_t) { return std::make_unique<optim::ConstantLr>(kLr); };
      this->servers.push_back(std::make_unique<ParamServer>(std::move(o)));
      publish_server(*store, i, this->servers.back()->address());
    }
  }
  WorkerOptions worker(int rank, int workers) const {
    return {.rank = rank,
            .num_workers = workers,
            .num_servers = int(servers.size()),
            .store = store,
            .secret = secret,
            .timeout = 5s};
  }
  net::Secret secret;
  std::shared_ptr<rendezvous::Store> store = std::make_shared<rendezvous::HashStore>();
  std::vector<std::unique_ptr<ParamServer>> servers;
};

inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace cohort::ps
