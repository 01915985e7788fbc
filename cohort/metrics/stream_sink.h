#pragma once
// StreamSink: sends each record to the launcher's dashboard (monitor/dashboard.h) over the
// service channel, authenticated with the job secret. The launcher asks for it by setting
// COHORT_METRICS_STREAM=HOST:PORT in every worker's environment (`--dashboard`).
//
// Monitoring must never stop training: if the dashboard cannot be reached, or a record cannot
// be handed to the socket within `send_timeout` (the launcher stalled), the sink says so once
// and drops every later record. The run's JSONL file still has them all.
#include <chrono>
#include <memory>
#include <string>

#include "cohort/metrics/sink.h"
#include "cohort/net/service/client.h"
#include "cohort/rendezvous/bootstrap.h"

namespace cohort::metrics {

struct StreamSinkOptions {
  std::string host;
  uint16_t port = 0;
  net::Secret secret;
  int rank = 0;
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(10);
  std::chrono::milliseconds send_timeout = std::chrono::seconds(2);
};

class StreamSink final : public Sink {
 public:
  explicit StreamSink(StreamSinkOptions options);  // never throws for an unreachable peer
  void write(const Record& record) override;
  bool connected() const { return client_ != nullptr; }

 private:
  void give_up(const std::string& why);

  StreamSinkOptions options_;
  std::unique_ptr<net::service::Client> client_;
};

// The sink COHORT_METRICS_STREAM asks for, or nullptr when it is not set. InvalidArgument
// naming the variable if it is not HOST:PORT.
std::unique_ptr<Sink> stream_sink_from_env(const rendezvous::EnvMap& env, int rank);

}  // namespace cohort::metrics
