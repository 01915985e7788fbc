// `cohort fl server`: rounds, evaluation, metrics and checkpoints around federated::Coordinator.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cohort/ckpt/checkpoint.h"
#include "cohort/core/logging.h"
#include "cohort/federated/coordinator.h"
#include "cohort/federated/partition.h"
#include "cohort/metrics/sink.h"
#include "cohort/train/components.h"
#include "cohort/train/evaluate.h"
#include "cohort/train/roles/federated_common.h"
#include "cohort/train/roles/federated_roles.h"
#include "cohort/train/trainer_state.h"

namespace cohort::train {
namespace {

using Millis = std::chrono::milliseconds;

Millis seconds_key(const Config& cfg, const char* key) {
  return Millis(int64_t(std::llround(cfg.get_float(key) * 1000)));
}

federated::CoordinatorOptions coordinator_options(const Config& cfg) {
  federated::CoordinatorOptions o;
  o.clients = int(cfg.get_int("fl.clients"));
  o.fraction = cfg.get_float("fl.fraction");
  o.min_clients = int(cfg.get_int("fl.min_clients"));
  o.max_retries = int(cfg.get_int("fl.max_retries"));
  o.round_timeout = seconds_key(cfg, "fl.round_timeout_s");
  o.phase_timeout = seconds_key(cfg, "fl.phase_timeout_s");
  o.wait_clients = seconds_key(cfg, "fl.wait_clients_s");
  o.task.lr = cfg.get_float("optim.lr");
  o.task.local_epochs = cfg.get_int("fl.local_epochs");
  o.task.local_steps = cfg.get_int("fl.local_steps");
  o.secure = cfg.get_bool("fl.secure_aggregation");
  o.threshold_fraction = cfg.get_float("fl.secagg_threshold");
  o.frac_bits = int(cfg.get_int("fl.secagg_frac_bits"));
  o.dp.clip = cfg.get_float("fl.dp.clip");
  o.dp.noise_multiplier = cfg.get_float("fl.dp.noise_multiplier");
  o.dp.delta = cfg.get_float("fl.dp.delta");
  o.seed = uint64_t(cfg.get_int("run.seed"));
  return o;
}

federated::StrategyOptions strategy_options(const Config& cfg) {
  return {cfg.get_float("fl.server_lr"), cfg.get_float("fl.server_momentum"),
          cfg.get_float("fl.mu")};
}

void write_address(const std::string& path, const std::string& address) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << address << "\n";
    COHORT_CHECK_IO(f.good(), "cannot write the server address to '", tmp, "'");
  }
  std::filesystem::rename(tmp, path);  // readers never see half an address
}

// The server's state after a round, as a cohort checkpoint (atomic, verified).
ckpt::CheckpointData checkpoint_of(const fl::FlatModel& model, federated::Coordinator& c,
                                   int64_t rounds_done) {
  ckpt::CheckpointData d;
  d.step = rounds_done;
  model.load(c.global());
  for (const auto& [name, t] : model.params) d.model.emplace_back(name, t);
  const std::vector<float> st = c.strategy().state();
  if (!st.empty()) d.extra["strategy"].emplace_back("state", from_vector(st, {int64_t(st.size())}));
  d.state = {{"fl_rounds_done", rounds_done}, {"coordinator", c.state()}};
  return d;
}

// Continues from the newest checkpoint when run.resume asks; the rounds already done.
int64_t resume(const Config& cfg, ckpt::CheckpointManager& mgr, const fl::FlatModel& model,
               federated::Coordinator& c) {
  const std::string& how = cfg.get_string("run.resume");
  if (how.empty()) return 0;
  std::optional<ckpt::CheckpointData> d =
      how == "auto" ? mgr.load_latest() : ckpt::CheckpointManager::load(how);
  if (!d) {
    log::info("fl", "run.resume = auto: no checkpoint in ", mgr.dir(), "; starting fresh");
    return 0;
  }
  COHORT_CHECK_ARG(d->state.contains("fl_rounds_done"), "run.resume: the checkpoint in ", mgr.dir(),
                   " is not a federated server's");
  nn::StateDict sd;
  for (auto& [name, t] : d->model) sd.emplace(name, t);
  model.module->load_state_dict(sd);
  std::vector<float> st;
  if (d->extra.contains("strategy")) st = d->extra["strategy"].at(0).second.to_vector<float>();
  c.load_state(d->state["coordinator"], model.values(), std::move(st));
  const int64_t done = d->state["fl_rounds_done"].get<int64_t>();
  log::info("fl", "resumed after round ", done, " from ", mgr.dir());
  return done;
}

// The clients' label histogram: printed, and saved as <run dir>/partition.json.
void write_partition(const Config& cfg, const data::Dataset& train, const std::string& run_dir) {
  const std::vector<int64_t> labels = fl::labels_of(train);
  const auto counts = federated::label_histogram(labels, 10, fl::partition(cfg, train));
  std::printf("data split over %lld clients (fl.partition = %s%s):\n%s",
              (long long)cfg.get_int("fl.clients"), cfg.get_string("fl.partition").c_str(),
              cfg.get_string("fl.partition") == "dirichlet"
                  ? (", alpha " + cfg.value_str("fl.alpha")).c_str()
                  : "",
              federated::format_histogram(counts).c_str());
  std::ofstream(run_dir + "/partition.json") << federated::histogram_json(counts).dump() << "\n";
}

void print_round(const federated::RoundRecord& r, int64_t rounds, const EvalResult& e) {
  std::printf("round %lld/%lld: %zu of %zu clients", (long long)r.round + 1, (long long)rounds,
              r.participants.size(), r.sampled.size());
  if (!r.dropped.empty()) std::printf(" (%zu dropped)", r.dropped.size());
  std::printf(", test accuracy %.2f%%, loss %.4f, %.2f s", 100 * e.accuracy, e.loss, r.seconds);
  if (r.epsilon >= 0) std::printf(", epsilon %.3f", r.epsilon);
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

FlServerSummary run_fl_server(const Config& cfg, const FlServerArgs& args) {
  fl::check_federated_config(cfg);
  FlServerSummary summary;
  summary.run_dir = make_run_dir(cfg, true);
  const DataSplits data = make_data(cfg);
  write_partition(cfg, *data.train, summary.run_dir);
  const fl::FlatModel model(make_model(cfg, data.inputs));
  const fl::Security sec = fl::server_security(cfg);
  federated::FlServerOptions so;
  so.service.name = "federated server";
  so.service.host = cfg.get_string("fl.host");
  so.service.port = uint16_t(cfg.get_int("fl.port"));
  so.service.secret = sec.secret;
  so.service.tls = sec.tls;
  so.layout = model.layout;
  so.expected_clients = int(cfg.get_int("fl.clients"));
  federated::FlServer server(so);
  std::printf("federated server listening on %s\n", server.address().c_str());
  std::fflush(stdout);
  write_address(args.address_file, server.address());
  federated::Coordinator coord(
      server,
      federated::strategy_registry().make(cfg.get_string("fl.strategy"), strategy_options(cfg)),
      coordinator_options(cfg), model.values());
  std::string ckpt_dir = cfg.get_string("ckpt.dir");
  if (ckpt_dir.empty()) ckpt_dir = summary.run_dir + "/checkpoints";
  ckpt::CheckpointManager mgr({ckpt_dir, int(cfg.get_int("ckpt.keep")), false});
  metrics::JsonlFile sink(summary.run_dir + "/metrics.jsonl");
  const int64_t rounds = cfg.get_int("fl.rounds");
  const auto start = std::chrono::steady_clock::now();
  for (int64_t r = resume(cfg, mgr, model, coord); r < rounds; ++r) {
    federated::RoundRecord rec = coord.run_round(r);
    model.load(coord.global());
    summary.eval = evaluate_split([&](const Tensor& x) { return (*model.module)(x); }, data.eval,
                                  {.batch = 500});
    print_round(rec, rounds, summary.eval);
    nlohmann::json j = rec.to_json();
    j["event"] = "fl_round";
    j["test_accuracy"] = summary.eval.accuracy;
    j["test_loss"] = summary.eval.loss;
    sink.write(j);
    if (cfg.get_bool("ckpt.enabled")) mgr.save(checkpoint_of(model, coord, r + 1));
    summary.rounds = r + 1;
    summary.epsilon = rec.epsilon;
  }
  if (summary.eval.samples == 0) {  // resumed with no round left: report the final model
    model.load(coord.global());
    summary.eval = evaluate_split([&](const Tensor& x) { return (*model.module)(x); }, data.eval,
                                  {.batch = 500});
  }
  server.say_bye();
  server.wait_for_clients_to_leave(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace cohort::train
