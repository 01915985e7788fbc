#include "cohort/train/federated_common.h"

#include <filesystem>

#include "cohort/core/error.h"
#include "cohort/train/train_config.h"

namespace cohort::train::fl {
namespace {

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
    s.secret = rendezvous::Secret::from_hex(hex->second, "COHORT_JOB_SECRET");
    return s;
  }
  s.secret = rendezvous::Secret::from_file(in_keys(cfg, kSecretFile));
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

void check_federated_config(const Config& cfg) {
  const std::string& dataset = cfg.get_string("data.dataset");
  COHORT_CHECK_ARG(dataset == "fashion_mnist" || dataset == "synthetic",
                   "federated learning splits an image classification set over the clients: "
                   "data.dataset must be 'fashion_mnist' or 'synthetic' (got '",
                   dataset, "')");
  COHORT_CHECK_ARG(cfg.get_string("model.type") != "gpt",
                   "federated learning trains a classifier: model.type = 'gpt' is not supported");
}

}  // namespace cohort::train::fl
