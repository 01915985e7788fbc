#include "cohort/federated/coordinator.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/core/rng.h"
#include "cohort/federated/quantize.h"
#include "cohort/net/secret.h"

namespace cohort::federated {

nlohmann::json RoundRecord::to_json() const {
  nlohmann::json dropped_json = nlohmann::json::array();
  for (const DroppedClient& d : dropped) dropped_json.push_back({{"id", d.id}, {"why", d.why}});
  nlohmann::json j = {{"round", round},
                      {"attempts", attempts},
                      {"sampled", sampled},
                      {"participants", participants},
                      {"dropped", dropped_json},
                      {"seconds", seconds},
                      {"bytes_in_per_client", bytes_in_per_client},
                      {"bytes_out_per_client", bytes_out_per_client}};
  if (train_loss >= 0) j["train_loss"] = train_loss;
  if (epsilon >= 0) j["epsilon"] = epsilon;
  return j;
}

Coordinator::Coordinator(FlServer& server, std::unique_ptr<AggregationStrategy> strategy,
                         CoordinatorOptions options, std::vector<float> initial)
    : server_(server),
      strategy_(std::move(strategy)),
      options_(std::move(options)),
      global_(std::move(initial)) {
  COHORT_CHECK_ARG(int64_t(global_.size()) == server_.layout().total,
                   "federated coordinator: ", "an initial model of ", global_.size(),
                   " values for a layout of ", server_.layout().total);
  net::random_bytes({reinterpret_cast<uint8_t*>(&noise_seed_), sizeof noise_seed_});
  COHORT_CHECK_ARG(options_.clients >= 1, "fl.clients must be >= 1 (got ", options_.clients, ")");
  COHORT_CHECK_ARG(options_.fraction > 0 && options_.fraction <= 1,
                   "fl.fraction must be in (0, 1] (got ", options_.fraction, ")");
  COHORT_CHECK_ARG(options_.min_clients >= 1 && options_.min_clients <= options_.clients,
                   "fl.min_clients must be in [1, fl.clients = ", options_.clients, "] (got ",
                   options_.min_clients, ")");
  COHORT_CHECK_ARG(!options_.secure || strategy_->supports_secure(), "fl.strategy = '",
                   strategy_->name(), "' needs single updates; it cannot run with ",
                   "fl.secure_aggregation = true");
  COHORT_CHECK_ARG(!options_.dp.enabled() || options_.dp.noise_multiplier >= 0,
                   "fl.dp.noise_multiplier must be >= 0");
}

std::vector<uint32_t> Coordinator::sample(const std::vector<uint32_t>& connected, int64_t round,
                                          int attempt) const {
  const int want =
      std::max(options_.min_clients, int(std::ceil(options_.fraction * options_.clients - 1e-9)));
  std::vector<uint32_t> pool = connected;
  const Philox rng(derive_seed(derive_seed(options_.seed, "fl.sample"), uint64_t(round)));
  // Fisher-Yates over the sorted ids: the same on every run for the same connected set.
  for (size_t i = pool.size(); i > 1; --i) {
    const size_t j = size_t(rng.uniform(i, uint64_t(attempt)) * float(i)) % i;
    std::swap(pool[i - 1], pool[j]);
  }
  pool.resize(std::min(pool.size(), size_t(want)));
  std::sort(pool.begin(), pool.end());
  return pool;
}

RoundPlan Coordinator::plan(int64_t round, std::vector<uint32_t> sampled) const {
  RoundPlan p;
  p.round = round;
  p.settings = options_.task;
  p.settings.mu = strategy_->client_mu(round);
  p.settings.secure = options_.secure;
  p.settings.frac_bits = options_.frac_bits;
  p.settings.threshold = int(std::floor(options_.threshold_fraction * double(sampled.size()))) + 1;
  p.settings.threshold = std::min<int>(p.settings.threshold, int(sampled.size()));
  p.settings.clip = options_.dp.clip;
  p.settings.uniform_weight = options_.dp.enabled();
  p.sampled = std::move(sampled);
  p.global = global_;
  p.deadline = Clock::now() + options_.round_timeout;
  p.phase_timeout = options_.phase_timeout;
  return p;
}

RoundRecord Coordinator::run_round(int64_t round) {
  server_.set_round(round);
  RoundRecord rec;
  rec.round = round;
  const auto start = Clock::now();
  if (!started_) {
    // The job's first round waits for every expected client (up to wait_clients), so that it
    // samples from all of them rather than from the first few to connect.
    started_ = true;
    server_.wait_for_clients(options_.clients, Clock::now() + options_.wait_clients);
  }
  for (int attempt = 0; attempt <= options_.max_retries; ++attempt) {
    rec.attempts = attempt + 1;
    server_.wait_for_clients(options_.min_clients, Clock::now() + options_.wait_clients);
    const std::vector<uint32_t> pool = server_.connected();
    RoundPlan p = plan(round, sample(pool, round, attempt));
    p.pool = pool.size();
    if (int(p.sampled.size()) < options_.min_clients) {
      log::warn("fl", "round ", round, ": only ", p.sampled.size(),
                " clients connected, fl.min_clients = ", options_.min_clients, "; waiting");
      continue;
    }
    const RoundResult res = server_.run_round(p);
    rec.sampled = p.sampled;
    rec.dropped.clear();
    rec.bytes_in_per_client = rec.bytes_out_per_client = 0;
    for (const ClientReport& c : res.clients) {
      if (!c.completed) rec.dropped.push_back({c.id, c.dropped_why});
      rec.bytes_in_per_client += double(c.bytes.bytes_in) / double(res.clients.size());
      rec.bytes_out_per_client += double(c.bytes.bytes_out) / double(res.clients.size());
    }
    if (aggregate(res, p, rec)) {
      rec.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return rec;
    }
  }
  COHORT_CHECK_T(false, Timeout, "federated round ", round, " failed ", options_.max_retries + 1,
                 " times: fewer than fl.min_clients = ", options_.min_clients,
                 " clients finished it within fl.round_timeout_s (raise fl.round_timeout_s or "
                 "fl.max_retries, lower fl.min_clients, or start more clients)");
  return rec;
}

bool Coordinator::aggregate(const RoundResult& res, const RoundPlan& p, RoundRecord& rec) {
  if (!res.failure.empty() || int(res.contributors.size()) < options_.min_clients) {
    log::warn("fl", "round ", p.round, " attempt ", rec.attempts, " does not count: ",
              res.failure.empty()
                  ? std::to_string(res.contributors.size()) +
                        " updates, fl.min_clients = " + std::to_string(options_.min_clients)
                  : res.failure);
    return false;
  }
  double total_weight = 0;
  std::vector<float> mean;
  try {
    mean = p.settings.secure ? mean_of_secure_sum(res, p, &total_weight)
                             : mean_of_updates(res, p, &total_weight);
  } catch (const InvalidArgument& e) {  // weights that make no mean: the attempt does not count
    log::warn("fl", "round ", p.round, " attempt ", rec.attempts, " does not count: ", e.what());
    return false;
  }
  rec.participants = res.contributors;
  if (!p.settings.secure) {
    double loss = 0;
    for (const Update& u : res.updates) loss += u.train_loss / double(res.updates.size());
    rec.train_loss = loss;
  }
  RoundAggregate agg;
  agg.round = p.round;
  agg.mean_delta = mean;
  agg.total_weight = total_weight;
  agg.participants = int(res.contributors.size());
  for (const Update& u : res.updates) agg.updates.emplace_back(u.delta);
  strategy_->apply(global_, agg);
  if (options_.dp.enabled()) {
    // q: each connected client's chance to be in the round. The accountant's bound is for
    // Poisson sampling; a fixed-size draw is the usual approximation (docs/federated.md).
    accountant_.add_steps(double(p.sampled.size()) / double(std::max<size_t>(p.pool, 1)),
                          options_.dp.noise_multiplier, 1);
    rec.epsilon = accountant_.epsilon(options_.dp.delta).epsilon;
  }
  return true;
}

namespace {

// Central DP's noise on a sum of clipped updates: N(0, (z S)^2) per coordinate, drawn from
// (seed, round) so a resumed server adds the same noise to the same round.
void add_dp_noise(std::vector<float>& sum, const DpOptions& dp, uint64_t seed, int64_t round) {
  if (dp.noise_multiplier > 0)
    add_gaussian_noise(sum, dp.noise_multiplier * dp.clip, seed, uint64_t(round));
}

}  // namespace

std::vector<float> Coordinator::mean_of_updates(const RoundResult& res, const RoundPlan& p,
                                                double* total_weight) const {
  std::vector<double> sum(global_.size(), 0.0);
  double total = 0;
  for (const Update& u : res.updates) {
    std::vector<float> d = u.delta;
    if (options_.dp.enabled()) clip_l2(d, options_.dp.clip);  // the server checks the clip
    const double w = options_.dp.enabled() ? 1.0 : double(u.num_samples);
    for (size_t i = 0; i < d.size(); ++i) sum[i] += w * d[i];
    total += w;
  }
  std::vector<float> mean(sum.begin(), sum.end());
  COHORT_CHECK_ARG(total > 0, "round ", p.round, ": the updates' weights sum to 0");
  *total_weight = total;
  if (options_.dp.enabled()) {
    add_dp_noise(mean, options_.dp, noise_seed_, p.round);
    total = double(p.sampled.size());
  }
  for (float& v : mean) v = float(v / total);
  return mean;
}

std::vector<float> Coordinator::mean_of_secure_sum(const RoundResult& res, const RoundPlan& p,
                                                   double* total_weight) const {
  std::vector<float> sum(res.secure_sum.size());
  dequantize(res.secure_sum, p.settings.frac_bits, sum);
  double total = sum.back();
  sum.pop_back();
  COHORT_CHECK_ARG(total > 0, "round ", p.round, ": the secure sum's weights sum to ", total);
  // Under DP every client weighs 1: the sum of weights must be the number of contributors.
  COHORT_CHECK_ARG(!options_.dp.enabled() || std::lround(total) == long(res.contributors.size()),
                   "round ", p.round, ": the secure sum's weights add to ", total, " for ",
                   res.contributors.size(), " clients of weight 1");
  *total_weight = total;
  if (options_.dp.enabled()) {
    add_dp_noise(sum, options_.dp, noise_seed_, p.round);
    total = double(p.sampled.size());
  }
  for (float& v : sum) v = float(v / total);
  return sum;
}

nlohmann::json Coordinator::state() const {
  return {{"accountant", accountant_.to_json()},
          {"strategy", strategy_->name()},
          {"dp_noise_seed", noise_seed_}};
}

void Coordinator::load_state(const nlohmann::json& state, std::vector<float> global,
                             std::vector<float> strategy_state) {
  COHORT_CHECK_ARG(global.size() == global_.size(), "federated checkpoint: a model of ",
                   global.size(), " values, this server's has ", global_.size());
  const std::string saved = state.value("strategy", std::string());
  COHORT_CHECK_ARG(saved == strategy_->name(), "federated checkpoint: written by fl.strategy = '",
                   saved, "', this run has '", strategy_->name(), "'");
  global_ = std::move(global);
  strategy_->load_state(std::move(strategy_state));
  if (state.contains("accountant")) accountant_ = RdpAccountant::from_json(state["accountant"]);
  if (state.contains("dp_noise_seed")) noise_seed_ = state["dp_noise_seed"].get<uint64_t>();
}

}  // namespace cohort::federated
