#pragma once
// What both federated roles build from a Config: the security material (fl.keys), the model's
// flat view, and the service options. Internal to train/.
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/config.h"
#include "cohort/data/dataset.h"
#include "cohort/net/service/client.h"
#include "cohort/net/service/server.h"
#include "cohort/nn/module.h"
#include "cohort/ps/partition.h"

namespace cohort::train::fl {

// The files `cohort fl keys DIR` writes.
inline constexpr const char* kSecretFile = "secret";
std::string client_cert_name(uint32_t id);  // "client-3"

// The secret and TLS files of a role: from fl.keys, or COHORT_JOB_SECRET and plain TCP.
struct Security {
  net::Secret secret;
  net::TlsOptions tls;
};
Security server_security(const Config& cfg);
Security client_security(const Config& cfg, uint32_t id);

// A model's parameters as one flat f32 vector (ps::Layout's order) and back.
struct FlatModel {
  std::shared_ptr<nn::Module> module;
  NamedTensors params;
  ps::Layout layout;
  explicit FlatModel(std::shared_ptr<nn::Module> m);
  std::vector<float> values() const;
  void load(const std::vector<float>& flat) const;
};

// The class label of every sample of a classification set.
std::vector<int64_t> labels_of(const data::Dataset& d);
// Every client's sample indices in the training split, as fl.partition, fl.clients, fl.alpha,
// fl.min_samples and run.seed cut it: the same on the server and every client.
std::vector<std::vector<int64_t>> partition(const Config& cfg, const data::Dataset& train);

// InvalidArgument unless the config trains a classifier on images (what fl.partition splits)
// and fl.min_clients <= fl.clients.
void check_federated_config(const Config& cfg);

}  // namespace cohort::train::fl
