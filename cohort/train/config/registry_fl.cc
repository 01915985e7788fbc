// Declarations of the federated-learning keys (`cohort fl server|client|run`, docs/federated.md):
// part of the registry behind docs/config.md. The model, data, optimizer and run keys are the
// same as `cohort train`'s: a client trains with optim.* and data.batch_size.
#include "cohort/train/config/train_config.h"

namespace cohort::train {
namespace {

using T = ConfigType;

void add_round_keys(ConfigRegistry& r) {
  r.add({"fl.clients",
         T::kInt,
         int64_t(10),
         "K: clients the job expects (the data is split K ways; client ids are 0..K-1).",
         "",
         {},
         1.0,
         100000.0});
  r.add({"fl.rounds", T::kInt, int64_t(30), "Federated rounds.", "", {}, 1.0});
  r.add({"fl.fraction",
         T::kFloat,
         0.5,
         "C: the share of fl.clients sampled each round (at least fl.min_clients).",
         "",
         {},
         0.0001,
         1.0});
  r.add({"fl.min_clients",
         T::kInt,
         int64_t(2),
         "A round needs this many updates; with fewer it does not count and is retried.",
         "",
         {},
         1.0});
  r.add({"fl.max_retries",
         T::kInt,
         int64_t(3),
         "Attempts of a failed round beyond the first, then the server stops with an error.",
         "",
         {},
         0.0});
  r.add({"fl.local_epochs",
         T::kInt,
         int64_t(1),
         "E: passes over its own data each client makes per round.",
         "",
         {},
         1.0});
  r.add({"fl.local_steps",
         T::kInt,
         int64_t(0),
         "> 0: each client makes this many minibatch steps per round instead of "
         "fl.local_epochs.",
         "",
         {},
         0.0});
  r.add({"fl.round_timeout_s",
         T::kFloat,
         120.0,
         "A round's deadline: clients that have not answered by then are left out.",
         "",
         {},
         0.1});
  r.add({"fl.phase_timeout_s",
         T::kFloat,
         10.0,
         "Secure aggregation: the deadline of each key phase (advertise, share, unmask).",
         "",
         {},
         0.1});
  r.add({"fl.wait_clients_s",
         T::kFloat,
         120.0,
         "How long the server waits for fl.min_clients clients before a round.",
         "",
         {},
         0.1});
}

void add_fl_strategy_keys(ConfigRegistry& r) {
  r.add({"fl.strategy", T::kString, std::string("fedavg"),
         "Aggregation: `fedavg`, `fedprox` (clients add mu/2 |w - w_global|^2), `fedavgm` "
         "(server momentum), or one a program registered (federated/strategy.h)."});
  r.add({"fl.mu", T::kFloat, 0.01, "FedProx's proximal weight mu.", "", {}, 0.0});
  r.add({"fl.server_lr",
         T::kFloat,
         1.0,
         "The server's step on the mean delta (1: FedAvg's plain average).",
         "",
         {},
         0.0});
  r.add(
      {"fl.server_momentum", T::kFloat, 0.9, "FedAvgM's server momentum beta.", "", {}, 0.0, 1.0});
  r.add({"fl.partition",
         T::kString,
         std::string("iid"),
         "How Fashion-MNIST's training set is split over the clients: `iid` or `dirichlet` "
         "(label proportions ~ Dirichlet(fl.alpha)).",
         "",
         {"iid", "dirichlet"}});
  r.add(
      {"fl.alpha", T::kFloat, 0.5, "Dirichlet concentration: small is more skewed.", "", {}, 1e-6});
  r.add({"fl.min_samples",
         T::kInt,
         int64_t(10),
         "Dirichlet partitions are redrawn until every client has this many samples.",
         "",
         {},
         1.0});
}

void add_security_keys(ConfigRegistry& r) {
  r.add({"fl.host", T::kString, std::string("127.0.0.1"),
         "Server: the address to bind (loopback unless told otherwise)."});
  r.add({"fl.port",
         T::kInt,
         int64_t(0),
         "Server: the port (0: any free one, printed).",
         "",
         {},
         0.0,
         65535.0});
  r.add({"fl.keys", T::kString, std::string(""),
         "Directory from `cohort fl keys`: the job CA, certificates and secret (TLS + the job "
         "secret). Empty: plain TCP with the secret from COHORT_JOB_SECRET (loopback only)."});
  r.add({"fl.secure_aggregation", T::kBool, false,
         "Secure aggregation (Bonawitz et al. 2017): the server learns only the sum of the "
         "updates."});
  r.add({"fl.secagg_threshold",
         T::kFloat,
         0.5,
         "Secure aggregation's Shamir threshold t = floor(this x sampled) + 1: a round survives "
         "the loss of up to n - t clients.",
         "",
         {},
         0.0,
         1.0});
  r.add({"fl.secagg_frac_bits",
         T::kInt,
         int64_t(24),
         "Secure aggregation's fixed point: values are sent as round(x * 2^bits) in Z_2^64.",
         "",
         {},
         8.0,
         40.0});
  r.add({"fl.dp.clip",
         T::kFloat,
         0.0,
         "Differential privacy: clip each client's update to this L2 norm S (0: no DP).",
         "",
         {},
         0.0});
  r.add({"fl.dp.noise_multiplier",
         T::kFloat,
         1.0,
         "Differential privacy: Gaussian noise of std z*S on the sum of updates.",
         "",
         {},
         0.0});
  r.add({"fault.fl_train_delay_s",
         T::kFloat,
         0.0,
         "Fault seam: each federated client waits this long after its local training, so that "
         "tests and demos can kill or lose clients in the middle of a round.",
         "",
         {},
         0.0});
  r.add({"fl.dp.delta",
         T::kFloat,
         1e-5,
         "Differential privacy: the delta of (epsilon, delta).",
         "",
         {},
         1e-12,
         0.5});
}

}  // namespace

void add_federated_keys(ConfigRegistry& r) {
  add_round_keys(r);
  add_fl_strategy_keys(r);
  add_security_keys(r);
}

}  // namespace cohort::train
