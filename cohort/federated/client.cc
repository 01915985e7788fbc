#include "cohort/federated/client.h"

#include <thread>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/federated/dp.h"
#include "cohort/federated/quantize.h"
#include "cohort/federated/secagg.h"

namespace cohort::federated {

using Clock = std::chrono::steady_clock;

struct FlClient::RoundState {
  Task task;
  secagg::Client sa;
  std::optional<LocalResult> result;
};

FlClient::FlClient(FlClientOptions options, LocalTrainFn train)
    : options_(std::move(options)), train_(std::move(train)) {
  if (options_.service.name == "service") options_.service.name = "federated server";
}

FlClient::~FlClient() = default;

ClientSummary FlClient::run() {
  ClientSummary summary;
  Clock::time_point give_up = Clock::now() + options_.reconnect_timeout;
  while (!stop_ && !done_) {
    if (!connect_and_hello()) {
      COHORT_CHECK_T(Clock::now() < give_up, Timeout, "federated client ", options_.id,
                     ": no federated server at ", options_.service.host, ":", options_.service.port,
                     " for ", options_.reconnect_timeout.count() / 1000.0,
                     " s (is it running? are fl.host/port, the keys and the secret right?)");
      std::this_thread::sleep_for(options_.poll);
      continue;
    }
    serve(summary);
    client_.reset();
    give_up = Clock::now() + options_.reconnect_timeout;
  }
  summary.bye = done_ && !options_.stop_after;
  return summary;
}

bool FlClient::connect_and_hello() {
  net::service::ClientOptions o = options_.service;
  o.connect_timeout = std::min<std::chrono::milliseconds>(o.connect_timeout, options_.poll * 5);
  try {
    client_ = std::make_unique<net::service::Client>(o);
    Hello h{kProtocolVersion, options_.id, options_.num_samples, options_.layout};
    const Welcome w = decode_welcome(client_->request(encode(h)), "the server's welcome");
    log::info("fl", "client ", options_.id, " joined ", client_->describe(), " at round ", w.round,
              " (", w.clients, " clients expected)");
    return true;
  } catch (const Timeout&) {
  } catch (const net::service::HandshakeError&) {
    throw;  // a wrong certificate or secret: retrying cannot help
  } catch (const IoError& e) {
    log::debug("fl", "client ", options_.id, ": ", e.what());
  }
  client_.reset();
  return false;
}

void FlClient::serve(ClientSummary& summary) {
  try {
    while (!stop_ && !done_) {
      std::optional<Bytes> msg = client_->receive(options_.poll);
      if (!msg) continue;
      const std::string what = "a message from " + client_->describe();
      switch (peek_kind(*msg, what)) {
        case MsgKind::kTask:
          on_task(decode_task(*msg, what), summary);
          break;
        case MsgKind::kSecAgg:
          on_secagg(decode_secagg(*msg, what), summary);
          break;
        case MsgKind::kBye:
          done_ = true;
          break;
        default:
          log::warn("fl", "client ", options_.id, ": ignored ", what);
      }
    }
  } catch (const IoError& e) {
    log::warn("fl", "client ", options_.id, ": lost the server (", e.what(), "); reconnecting");
  } catch (const Timeout& e) {  // an answer that never came: a fresh connection
    log::warn("fl", "client ", options_.id, ": ", e.what(), "; reconnecting");
  }
}

bool FlClient::send(const Bytes& payload, const char* what, ClientSummary& summary) {
  try {
    client_->request(payload);
    return true;
  } catch (const InvalidArgument& e) {
    ++summary.refused;
    log::warn("fl", "client ", options_.id, ": the server refused its ", what, ": ", e.what());
    return false;
  }
}

LocalResult FlClient::train(const Task& task) {
  LocalResult r = train_(task);
  COHORT_CHECK_ARG(int64_t(r.delta.size()) == options_.layout.total, "federated client ",
                   options_.id, ": local training returned ", r.delta.size(),
                   " values for a model of ", options_.layout.total);
  // Differential privacy bounds each client's influence: the clip is applied here so that it
  // holds under secure aggregation too, where the server never sees a single update.
  if (task.settings.clip > 0) clip_l2(r.delta, task.settings.clip);
  return r;
}

void FlClient::on_task(Task task, ClientSummary& summary) {
  round_.reset();  // a newer task abandons an unfinished secure round
  if (task.settings.secure) {
    secagg::Params p{uint64_t(task.round), task.settings.threshold,
                     size_t(options_.layout.total) + 1};
    round_ = std::make_unique<RoundState>(RoundState{task, secagg::Client(options_.id, p), {}});
    SecAggMsg m{options_.id, task.round, task.task_id, SecAggPhase::kAdvertise,
                round_->sa.advertise()};
    send(encode(m), phase_name(m.phase), summary);
    if (options_.stop_after == m.phase) done_ = true;
    return;
  }
  LocalResult r;
  try {
    r = train(task);
  } catch (const InvalidArgument& e) {  // e.g. local training diverged to NaN
    log::warn("fl", "client ", options_.id, ": round ", task.round, " skipped: ", e.what());
    return;
  }
  Update u{options_.id, task.round, task.task_id, r.num_samples, r.loss, 0, r.delta};
  if (send(encode(u), "update", summary)) ++summary.rounds;
}

void FlClient::on_secagg(const SecAggMsg& m, ClientSummary& summary) {
  if (!round_ || m.round != round_->task.round || m.task_id != round_->task.task_id) {
    log::debug("fl", "client ", options_.id, ": ignored a ", phase_name(m.phase),
               " message of a round it is not in");
    return;
  }
  SecAggMsg out{options_.id, m.round, m.task_id, SecAggPhase::kShares, {}};
  try {
    switch (m.phase) {
      case SecAggPhase::kRoster:
        out.body = round_->sa.share_keys(m.body);
        break;
      case SecAggPhase::kSharesForYou: {
        round_->result = train(round_->task);
        out.phase = SecAggPhase::kMasked;
        out.body =
            round_->sa.masked_input(secure_input(*round_->result, round_->task.settings), m.body);
        break;
      }
      case SecAggPhase::kSurvivors:
        out.phase = SecAggPhase::kUnmask;
        out.body = round_->sa.unmask(m.body);
        break;
      default:
        COHORT_CHECK_ARG(false, "a client phase from the server: ", phase_name(m.phase));
    }
  } catch (const InvalidArgument& e) {
    log::warn("fl", "client ", options_.id, ": round ", m.round, " abandoned: ", e.what());
    round_.reset();
    return;
  } catch (const secagg::TooFewUsers& e) {  // the round cannot finish; the connection is fine
    log::warn("fl", "client ", options_.id, ": round ", m.round, " abandoned: ", e.what());
    round_.reset();
    return;
  }
  if (send(encode(out), phase_name(out.phase), summary) && out.phase == SecAggPhase::kMasked)
    ++summary.rounds;
  if (options_.stop_after == out.phase) done_ = true;
}

// The vector a client contributes to the secure sum: w * delta, then w itself, in fixed point,
// so the server can divide the sum by the sum of weights without seeing any single one.
std::vector<uint64_t> FlClient::secure_input(const LocalResult& r, const TaskSettings& s) const {
  const double w = s.uniform_weight ? 1.0 : double(r.num_samples);
  std::vector<float> x(r.delta.size() + 1);
  for (size_t i = 0; i < r.delta.size(); ++i) x[i] = float(w * r.delta[i]);
  x.back() = float(w);
  std::vector<uint64_t> q(x.size());
  quantize(x, s.frac_bits, q);
  return q;
}

}  // namespace cohort::federated
