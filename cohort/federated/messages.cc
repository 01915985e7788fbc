#include "cohort/federated/messages.h"

#include "cohort/core/bytes.h"
#include "cohort/core/error.h"

namespace cohort::federated {
namespace {

using ByteReader = bytes::Reader;
using bytes::put;
using bytes::put_array;
using bytes::put_string;

constexpr uint32_t kMaxParams = 1u << 20;           // parameters in a layout
constexpr int64_t kMaxElements = int64_t(1) << 40;  // values in a model (no overflow below)

void put_floats(Bytes& b, const std::vector<float>& v) {
  put(b, uint64_t(v.size()));
  put_array(b, v.data(), v.size());
}

std::vector<float> get_floats(ByteReader& r) {
  const uint64_t n = r.get<uint64_t>();
  COHORT_CHECK_ARG(n <= r.remaining() / sizeof(float), r.what(), ": announces ", n,
                   " values but holds only ", r.remaining(), " bytes (truncated)");
  std::vector<float> v(n);
  r.get_array(v.data(), n);
  return v;
}

ByteReader open(const Bytes& b, MsgKind kind, const std::string& what) {
  ByteReader r(b, what);
  const auto k = r.get<uint8_t>();
  COHORT_CHECK_ARG(k == uint8_t(kind), what, ": expected message kind ", int(kind), ", got ",
                   int(k));
  return r;
}

}  // namespace

MsgKind peek_kind(const Bytes& b, const std::string& what) {
  COHORT_CHECK_ARG(!b.empty(), what, ": an empty message");
  COHORT_CHECK_ARG(b[0] >= uint8_t(MsgKind::kHello) && b[0] <= uint8_t(MsgKind::kBye), what,
                   ": unknown message kind ", int(b[0]));
  return MsgKind(b[0]);
}

const char* phase_name(SecAggPhase p) {
  switch (p) {
    case SecAggPhase::kAdvertise:
      return "advertise keys";
    case SecAggPhase::kRoster:
      return "roster";
    case SecAggPhase::kShares:
      return "share keys";
    case SecAggPhase::kSharesForYou:
      return "shares for a client";
    case SecAggPhase::kMasked:
      return "masked input";
    case SecAggPhase::kSurvivors:
      return "survivors";
    case SecAggPhase::kUnmask:
      return "unmasking";
  }
  return "unknown phase";
}

Bytes encode(const Hello& h) {
  Bytes b;
  put(b, uint8_t(MsgKind::kHello));
  put(b, h.version);
  put(b, h.client_id);
  put(b, h.num_samples);
  put(b, uint32_t(h.layout.params.size()));
  for (const ps::ParamSlot& p : h.layout.params) {
    put_string(b, p.name);
    put(b, p.numel);
  }
  return b;
}

Hello decode_hello(const Bytes& b, const std::string& what) {
  ByteReader r = open(b, MsgKind::kHello, what);
  Hello h;
  h.version = r.get<uint32_t>();
  COHORT_CHECK_ARG(h.version == kProtocolVersion, what, ": protocol version ", h.version,
                   ", this server speaks ", kProtocolVersion);
  h.client_id = r.get<uint32_t>();
  h.num_samples = r.get<uint64_t>();
  const uint32_t n = r.get<uint32_t>();
  COHORT_CHECK_ARG(n <= kMaxParams, what, ": ", n, " parameters (at most ", kMaxParams, ")");
  for (uint32_t i = 0; i < n; ++i) {
    ps::ParamSlot p;
    p.name = r.get_string();
    p.numel = r.get<int64_t>();
    COHORT_CHECK_ARG(p.numel > 0 && p.numel <= kMaxElements - h.layout.total, what, ": parameter '",
                     p.name, "' has ", p.numel, " elements (a model holds at most ", kMaxElements,
                     ")");
    p.offset = h.layout.total;
    p.index = i;
    h.layout.total += p.numel;
    h.layout.params.push_back(std::move(p));
  }
  r.expect_end();
  return h;
}

Bytes encode(const Welcome& w) {
  Bytes b;
  put(b, w.round);
  put(b, w.clients);
  return b;
}

Welcome decode_welcome(const Bytes& b, const std::string& what) {
  ByteReader r(b, what);
  Welcome w;
  w.round = r.get<int64_t>();
  w.clients = r.get<int32_t>();
  r.expect_end();
  return w;
}

Bytes encode(const Task& t) {
  Bytes b;
  put(b, uint8_t(MsgKind::kTask));
  put(b, t.round);
  put(b, t.task_id);
  const TaskSettings& s = t.settings;
  put(b, s.lr);
  put(b, s.mu);
  put(b, s.local_epochs);
  put(b, s.local_steps);
  put(b, s.clip);
  put(b, s.secure);
  put(b, s.uniform_weight);
  put(b, s.frac_bits);
  put(b, s.threshold);
  put_floats(b, t.params);
  return b;
}

Task decode_task(const Bytes& b, const std::string& what) {
  ByteReader r = open(b, MsgKind::kTask, what);
  Task t;
  t.round = r.get<int64_t>();
  t.task_id = r.get<uint64_t>();
  TaskSettings& s = t.settings;
  s.lr = r.get<double>();
  s.mu = r.get<double>();
  s.local_epochs = r.get<int64_t>();
  s.local_steps = r.get<int64_t>();
  s.clip = r.get<double>();
  s.secure = r.get<uint8_t>();
  s.uniform_weight = r.get<uint8_t>();
  s.frac_bits = r.get<int32_t>();
  s.threshold = r.get<int32_t>();
  t.params = get_floats(r);
  r.expect_end();
  return t;
}

Bytes encode(const Update& u) {
  Bytes b;
  b.reserve(64 + u.delta.size() * sizeof(float));
  put(b, uint8_t(MsgKind::kUpdate));
  put(b, u.client_id);
  put(b, u.round);
  put(b, u.task_id);
  put(b, u.num_samples);
  put(b, u.train_loss);
  put(b, u.train_s);
  put_floats(b, u.delta);
  return b;
}

Update decode_update(const Bytes& b, const std::string& what) {
  ByteReader r = open(b, MsgKind::kUpdate, what);
  Update u;
  u.client_id = r.get<uint32_t>();
  u.round = r.get<int64_t>();
  u.task_id = r.get<uint64_t>();
  u.num_samples = r.get<uint64_t>();
  u.train_loss = r.get<double>();
  u.train_s = r.get<double>();
  u.delta = get_floats(r);
  r.expect_end();
  return u;
}

Bytes encode(const SecAggMsg& m) {
  Bytes b;
  put(b, uint8_t(MsgKind::kSecAgg));
  put(b, m.client_id);
  put(b, m.round);
  put(b, m.task_id);
  put(b, uint8_t(m.phase));
  b.insert(b.end(), m.body.begin(), m.body.end());
  return b;
}

SecAggMsg decode_secagg(const Bytes& b, const std::string& what) {
  ByteReader r = open(b, MsgKind::kSecAgg, what);
  SecAggMsg m;
  m.client_id = r.get<uint32_t>();
  m.round = r.get<int64_t>();
  m.task_id = r.get<uint64_t>();
  const auto phase = r.get<uint8_t>();
  COHORT_CHECK_ARG(
      phase >= uint8_t(SecAggPhase::kAdvertise) && phase <= uint8_t(SecAggPhase::kUnmask), what,
      ": unknown secure-aggregation phase ", int(phase));
  m.phase = SecAggPhase(phase);
  m.body = r.rest();
  return m;
}

Bytes encode_bye() {
  return Bytes{uint8_t(MsgKind::kBye)};
}

}  // namespace cohort::federated
