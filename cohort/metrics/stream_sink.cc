#include "cohort/metrics/stream_sink.h"

#include "cohort/core/error.h"
#include "cohort/core/logging.h"

namespace cohort::metrics {

StreamSink::StreamSink(StreamSinkOptions options) : options_(std::move(options)) {
  try {
    client_ = std::make_unique<net::service::Client>(
        net::service::ClientOptions{.host = options_.host,
                                    .port = options_.port,
                                    .secret = options_.secret,
                                    .name = "dashboard metrics stream",
                                    .connect_timeout = options_.connect_timeout,
                                    .timeout = options_.send_timeout});
  } catch (const Error& e) {
    give_up(e.what());
  }
}

void StreamSink::write(const Record& record) {
  if (!client_) return;
  const std::string m = nlohmann::json{{"rank", options_.rank}, {"record", record}}.dump();
  try {
    client_->send({reinterpret_cast<const uint8_t*>(m.data()), m.size()});
  } catch (const Error& e) {
    give_up(e.what());
  }
}

void StreamSink::give_up(const std::string& why) {
  log::warn("metrics", "rank ", options_.rank,
            ": not streaming metrics to the dashboard any more (", why,
            "); the JSONL file keeps every record");
  client_.reset();
}

std::unique_ptr<Sink> stream_sink_from_env(const rendezvous::EnvMap& env, int rank) {
  auto it = env.find("COHORT_METRICS_STREAM");
  if (it == env.end() || it->second.empty()) return nullptr;
  const std::string& v = it->second;
  const size_t colon = v.rfind(':');
  int port = 0;
  try {
    port = colon == std::string::npos ? 0 : std::stoi(v.substr(colon + 1));
  } catch (const std::exception&) {
    port = 0;
  }
  COHORT_CHECK_ARG(colon != std::string::npos && colon > 0 && port > 0 && port < 65536,
                   "COHORT_METRICS_STREAM='", v,
                   "': expected HOST:PORT (set by the launcher's "
                   "--dashboard)");
  return std::make_unique<StreamSink>(
      StreamSinkOptions{.host = v.substr(0, colon),
                        .port = uint16_t(port),
                        .secret = rendezvous::secret_from_env(env, net::SecretPolicy::kRequired),
                        .rank = rank});
}

}  // namespace cohort::metrics
