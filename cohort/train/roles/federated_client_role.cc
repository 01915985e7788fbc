// `cohort fl client`: a client's own part of the data and its local training.
#include <cstdio>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/core/rng.h"
#include "cohort/data/loader.h"
#include "cohort/nn/loss.h"
#include "cohort/train/components.h"
#include "cohort/train/roles/federated_common.h"
#include "cohort/train/roles/federated_roles.h"

namespace cohort::train {
namespace {

// Client `id`'s part of the training split, as fl.partition cuts it for fl.clients clients.
std::shared_ptr<const data::Dataset> client_part(const Config& cfg, uint32_t id) {
  const DataSplits data = make_data(cfg);
  std::vector<std::vector<int64_t>> parts = fl::partition(cfg, *data.train);
  log::info("fl", "client ", id, ": ", parts.at(id).size(), " of ", data.train->size(),
            " training samples (fl.partition = ", cfg.get_string("fl.partition"), ")");
  return std::make_shared<data::IndexSubset>(data.train, std::move(parts.at(id)));
}

// Local training from the task's global model: SGD (optim.*) with the task's learning rate, for
// fl.local_epochs passes (or fl.local_steps steps); FedProx adds mu (w - w_global) to each
// gradient, the gradient of (mu/2) |w - w_global|^2.
class LocalTrainer {
 public:
  LocalTrainer(const Config& cfg, uint32_t id)
      : cfg_(cfg), id_(id), model_(make_model(cfg)), part_(client_part(cfg, id)) {}

  uint64_t samples() const { return uint64_t(part_->size()); }
  const ps::Layout& layout() const { return model_.layout; }

  federated::LocalResult operator()(const federated::Task& t) {
    model_.load(t.params);
    model_.module->train();
    auto opt = make_optimizer(cfg_, *model_.module);
    opt->set_lr(t.settings.lr);
    data::Loader loader(part_, {.batch = cfg_.get_int("data.batch_size"),
                                .shuffle = true,
                                .seed = derive_seed(uint64_t(cfg_.get_int("run.seed")), id_),
                                .prefetch = 1});
    const int64_t steps = t.settings.local_steps > 0 ? t.settings.local_steps
                                                     : t.settings.local_epochs * loader.len();
    federated::LocalResult r;
    int64_t done = 0;
    for (int64_t pass = 0; done < steps; ++pass) {
      loader.set_epoch(t.round * 1000 + pass);  // another order every round and pass
      for (auto& b : loader) {
        if (done++ >= steps) break;
        opt->zero_grad();
        Tensor loss = nn::cross_entropy((*model_.module)(b.x), b.y);
        loss.backward();
        if (t.settings.mu > 0) add_proximal_gradient(t.params, t.settings.mu);
        opt->step();
        r.loss += double(loss.item<float>()) / double(steps);
      }
    }
    r.delta = model_.values();
    for (size_t i = 0; i < r.delta.size(); ++i) r.delta[i] -= t.params[i];
    r.num_samples = samples();  // FedAvg weighs a client by its data, not its step count
    const double delay = cfg_.get_float("fault.fl_train_delay_s");
    if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    return r;
  }

 private:
  void add_proximal_gradient(const std::vector<float>& global, double mu) {
    for (const ps::ParamSlot& slot : model_.layout.params) {
      const Tensor& p = model_.params[slot.index].second;
      Tensor g = p.grad();
      if (!g.defined()) continue;
      float* gd = g.data<float>();
      const float* w = p.data<float>();
      const float* w0 = global.data() + slot.offset;
      for (int64_t i = 0; i < slot.numel; ++i) gd[i] += float(mu) * (w[i] - w0[i]);
    }
  }

  const Config& cfg_;
  uint32_t id_;
  fl::FlatModel model_;
  std::shared_ptr<const data::Dataset> part_;
};

std::pair<std::string, uint16_t> split_address(const std::string& a) {
  const size_t colon = a.rfind(':');
  COHORT_CHECK_ARG(colon != std::string::npos && colon > 0 && colon + 1 < a.size(),
                   "--server: expected HOST:PORT, got '", a, "'");
  const int port = std::stoi(a.substr(colon + 1));
  COHORT_CHECK_ARG(port > 0 && port < 65536, "--server: port ", port, " out of range");
  return {a.substr(0, colon), uint16_t(port)};
}

}  // namespace

federated::ClientSummary run_fl_client(const Config& cfg, const FlClientArgs& args) {
  fl::check_federated_config(cfg);
  COHORT_CHECK_ARG(int64_t(args.id) < cfg.get_int("fl.clients"), "--client-id ", args.id,
                   " is not below fl.clients = ", cfg.get_int("fl.clients"));
  LocalTrainer trainer(cfg, args.id);
  const fl::Security sec = fl::client_security(cfg, args.id);
  federated::FlClientOptions o;
  std::tie(o.service.host, o.service.port) = split_address(args.server);
  o.service.secret = sec.secret;
  o.service.tls = sec.tls;
  o.service.timeout =
      std::chrono::milliseconds(int64_t(cfg.get_float("fl.round_timeout_s") * 1000) + 10000);
  o.id = args.id;
  o.num_samples = trainer.samples();
  o.layout = trainer.layout();
  o.reconnect_timeout =
      std::chrono::milliseconds(int64_t(cfg.get_float("fl.wait_clients_s") * 1000));
  federated::FlClient client(o, [&](const federated::Task& t) { return trainer(t); });
  federated::ClientSummary s = client.run();
  std::printf("client %u: %d rounds trained, %d messages refused%s\n", args.id, s.rounds, s.refused,
              s.bye ? "; the server ended training" : "");
  return s;
}

}  // namespace cohort::train
