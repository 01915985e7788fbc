#pragma once
// What both federated roles build from a Config: the security material (fl.keys), the model's
// flat view, and the service options. Internal to train/.
#include <memory>
#include <string>
#include <vector>

#include "cohort/comm/service/client.h"
#include "cohort/comm/service/server.h"
#include "cohort/core/config.h"
#include "cohort/nn/module.h"
#include "cohort/ps/partition.h"

namespace cohort::train::fl {

// The files `cohort fl keys DIR` writes.
inline constexpr const char* kSecretFile = "secret";
std::string client_cert_name(uint32_t id);  // "client-3"

// The secret and TLS files of a role: from fl.keys, or COHORT_JOB_SECRET and plain TCP.
struct Security {
  rendezvous::Secret secret;
  rendezvous::TlsOptions tls;
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

// InvalidArgument unless the config trains a classifier on images (what fl.partition splits).
void check_federated_config(const Config& cfg);

}  // namespace cohort::train::fl
