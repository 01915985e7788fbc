#include "cohort/train/roles/federated_common.h"

#include <filesystem>

#include "cohort/core/error.h"
#include "cohort/core/rng.h"
#include "cohort/federated/partition.h"
#include "cohort/train/config/train_config.h"

namespace cohort::train::fl {
namespace {

constexpr int kNumClasses = 10;  // Fashion-MNIST's and the synthetic set's

std::string in_keys(const Config& cfg, const std::string& file) {
  const std::filesystem::path p = std::filesystem::path(cfg.get_string("fl.keys")) / file;
  COHORT_CHECK_ARG(std::filesystem::exists(p), "fl.keys: '", p.string(),
                   "' is missing (make the job's keys with `cohort fl keys DIR`)");
  return p.string();
}

Security security(const Config& cfg, const std::string& cert) {
  Security s;
  if (cfg.get_string("fl.keys").empty()) {
    const auto env = environment_snapshot();
    auto hex = env.find("COHORT_JOB_SECRET");
    COHORT_CHECK_ARG(hex != env.end(),
                     "federated learning needs the job's keys: set fl.keys to a directory from "
                     "`cohort fl keys DIR` (TLS + secret), or COHORT_JOB_SECRET for plain TCP");
    s.secret = net::Secret::from_hex(hex->second, "COHORT_JOB_SECRET");
    return s;
  }
  s.secret = net::Secret::from_file(in_keys(cfg, kSecretFile));
  s.tls.ca_file = in_keys(cfg, "ca.pem");
  s.tls.cert_file = in_keys(cfg, cert + ".pem");
  s.tls.key_file = in_keys(cfg, cert + ".key");
  return s;
}

}  // namespace

std::string client_cert_name(uint32_t id) {
  return "client-" + std::to_string(id);
}

Security server_security(const Config& cfg) {
  return security(cfg, "server");
}

Security client_security(const Config& cfg, uint32_t id) {
  return security(cfg, client_cert_name(id));
}

FlatModel::FlatModel(std::shared_ptr<nn::Module> m)
    : module(std::move(m)), params(module->named_parameters()), layout(ps::layout_of(params)) {}

std::vector<float> FlatModel::values() const {
  std::vector<float> v(size_t(layout.total));
  ps::gather_values(params, layout, {0, layout.total}, v.data());
  return v;
}

void FlatModel::load(const std::vector<float>& flat) const {
  COHORT_CHECK_ARG(int64_t(flat.size()) == layout.total, "a model of ", flat.size(),
                   " values for one of ", layout.total);
  ps::scatter_values(params, layout, {0, layout.total}, flat.data());
}

std::vector<int64_t> labels_of(const data::Dataset& d) {
  std::vector<int64_t> labels;
  labels.reserve(size_t(d.size()));
  std::vector<int64_t> idx;
  for (int64_t begin = 0; begin < d.size(); begin += 4096) {
    idx.clear();
    for (int64_t i = begin; i < std::min(d.size(), begin + 4096); ++i) idx.push_back(i);
    const std::vector<int64_t> y = d.get_batch(idx).y.to_vector<int64_t>();
    labels.insert(labels.end(), y.begin(), y.end());
  }
  return labels;
}

std::vector<std::vector<int64_t>> partition(const Config& cfg, const data::Dataset& train) {
  federated::PartitionOptions o;
  o.kind = federated::parse_partition_kind(cfg.get_string("fl.partition"));
  o.clients = int(cfg.get_int("fl.clients"));
  o.alpha = cfg.get_float("fl.alpha");
  o.seed = derive_seed(uint64_t(cfg.get_int("run.seed")), "fl.partition");
  o.min_samples = cfg.get_int("fl.min_samples");
  return federated::partition_indices(labels_of(train), kNumClasses, o);
}

void check_federated_config(const Config& cfg) {
  const std::string& dataset = cfg.get_string("data.dataset");
  COHORT_CHECK_ARG(dataset == "fashion_mnist" || dataset == "synthetic",
                   "federated learning splits an image classification set over the clients: "
                   "data.dataset must be 'fashion_mnist' or 'synthetic' (got '",
                   dataset, "')");
  COHORT_CHECK_ARG(cfg.get_string("model.type") != "gpt",
                   "federated learning trains a classifier: model.type = 'gpt' is not supported");
  COHORT_CHECK_ARG(cfg.get_string("run.device") == "cpu",
                   "federated learning runs on the CPU: run.device = '",
                   cfg.get_string("run.device"), "' is not supported by cohort fl yet");
  // Checked before anything listens or starts: no round could ever gather enough updates.
  const int64_t clients = cfg.get_int("fl.clients"), min_clients = cfg.get_int("fl.min_clients");
  COHORT_CHECK_ARG(min_clients <= clients, "fl.min_clients = ", min_clients,
                   " is more than fl.clients = ", clients,
                   ": a round needs fl.min_clients updates, so none could ever count; lower "
                   "fl.min_clients or raise fl.clients (`cohort fl run --clients K` sets it)");
}

}  // namespace cohort::train::fl
