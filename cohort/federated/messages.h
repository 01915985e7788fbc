#pragma once
// The federated-learning protocol, carried on the service channel (net/service): clients
// connect to the server (never the reverse), over TLS with the job's certificates plus the
// job secret. Clients send requests, which the server answers (an empty answer, or an error
// naming what was wrong); the server pushes tasks as messages.
//
//   client -> server (requests)                  server -> client (messages)
//   hello  {version, id, samples, layout}        task   {round, task id, settings, params}
//          -> welcome {round, clients}           secagg {round, task id, phase, body}
//   update {id, round, task id, samples, loss,   bye    {}: training is over
//           seconds, delta}            -> {}
//   secagg {id, round, task id, phase, body} -> {}
//
// A round under secure aggregation (secagg.h, Bonawitz et al.) runs in phases, each a message
// from every client and then one from the server:
//   task -> advertise (kAdvertise) -> roster (kRoster) -> shares (kShares) -> shares for that
//   client (kSharesForYou) -> masked input (kMasked) -> survivors (kSurvivors) -> unmask
//   shares (kUnmask). Plain rounds: task -> update.
//
// Replay and staleness: every task carries a fresh random task id; the server accepts one
// update (or one message per secagg phase) per outstanding task id and refuses any other,
// naming the client and the round. Malformed messages are InvalidArgument naming the sender.
// Little-endian, fixed-width integers; arrays length-prefixed.
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/net/service/wire.h"
#include "cohort/ps/partition.h"

namespace cohort::federated {

using net::service::Bytes;

inline constexpr uint32_t kProtocolVersion = 1;

enum class MsgKind : uint8_t { kHello = 1, kTask = 2, kUpdate = 3, kSecAgg = 4, kBye = 5 };
MsgKind peek_kind(const Bytes& b, const std::string& what);

struct Hello {
  uint32_t version = kProtocolVersion;
  uint32_t client_id = 0;
  uint64_t num_samples = 0;  // the client's training samples
  ps::Layout layout;         // its model's parameters, names and sizes
};
struct Welcome {
  int64_t round = 0;    // the server's next round
  int32_t clients = 0;  // clients the job expects (fl.clients)
};

// What a client does with a task: how long to train and how to send the result.
struct TaskSettings {
  double lr = 0.05;
  double mu = 0;               // FedProx's proximal weight; 0: plain local SGD
  int64_t local_epochs = 1;    // passes over the client's data, unless local_steps > 0
  int64_t local_steps = 0;     // > 0: this many minibatch steps instead
  double clip = 0;             // > 0: clip the update to this L2 norm before sending (DP)
  uint8_t secure = 0;          // 1: secure aggregation (the update goes as a masked input)
  uint8_t uniform_weight = 0;  // 1: weigh every client alike (DP), else by samples
  int32_t frac_bits = 24;      // secure aggregation's fixed point
  int32_t threshold = 0;       // secure aggregation's Shamir threshold
};
struct Task {
  int64_t round = 0;
  uint64_t task_id = 0;
  TaskSettings settings;
  std::vector<float> params;  // the global model, in the layout's order
};
struct Update {
  uint32_t client_id = 0;
  int64_t round = 0;
  uint64_t task_id = 0;
  uint64_t num_samples = 0;
  double train_loss = 0;     // mean over the local steps
  double train_s = 0;        // local training time
  std::vector<float> delta;  // local model - global model
};

enum class SecAggPhase : uint8_t {
  kAdvertise = 1,     // client: its public keys
  kRoster = 2,        // server: everyone's public keys
  kShares = 3,        // client: encrypted shares for the others
  kSharesForYou = 4,  // server: the shares addressed to this client
  kMasked = 5,        // client: its masked input
  kSurvivors = 6,     // server: who sent a masked input
  kUnmask = 7,        // client: the shares that remove the masks
};
const char* phase_name(SecAggPhase p);
struct SecAggMsg {
  uint32_t client_id = 0;  // the sender, or the addressee for the server's messages
  int64_t round = 0;
  uint64_t task_id = 0;
  SecAggPhase phase = SecAggPhase::kAdvertise;
  Bytes body;  // secagg.h's message
};

Bytes encode(const Hello& h);
Bytes encode(const Welcome& w);
Bytes encode(const Task& t);
Bytes encode(const Update& u);
Bytes encode(const SecAggMsg& m);
Bytes encode_bye();
// `what` names the sender in errors ("hello from 127.0.0.1:5012").
Hello decode_hello(const Bytes& b, const std::string& what);
Welcome decode_welcome(const Bytes& b, const std::string& what);
Task decode_task(const Bytes& b, const std::string& what);
Update decode_update(const Bytes& b, const std::string& what);
SecAggMsg decode_secagg(const Bytes& b, const std::string& what);

}  // namespace cohort::federated
