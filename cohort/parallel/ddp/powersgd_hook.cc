// PowerSgdHook (powersgd_hook.h): per-bucket plans, the two allreduces, state.
#include "cohort/parallel/ddp/powersgd_hook.h"
#include "cohort/core/clock.h"

#include <chrono>
#include <cmath>

#include "cohort/core/error.h"
#include "cohort/core/rng.h"
#include "cohort/kernels/cpu/gemm.h"
#include "cohort/parallel/ddp/low_rank.h"
#include "cohort/tensor/tensor.h"

namespace cohort::parallel {
namespace {

using Clock = std::chrono::steady_clock;
using cpu::MatRef;
using cpu::Trans;

comm::Work finished() {
  comm::Work w = comm::Work::pending("powersgd decode");
  w.complete(nullptr);
  return w;
}

}  // namespace

// One parameter of a bucket: its slot, its matrix view, and where its values (uncompressed)
// or its P travel in the first buffer and its Q in the second.
struct PowerSgdHook::Entry {
  std::string name;
  size_t lo = 0, numel = 0;
  low_rank::MatrixPlan matrix;  // rank 0: uncompressed
  size_t p_at = 0, q_at = 0;
  Matrix* state = nullptr;  // in matrices_ (std::map: stable)
};

struct PowerSgdHook::Plan {
  std::vector<std::string> params;
  std::vector<size_t> offsets;
  size_t numel = 0;
  std::vector<Entry> entries;
  std::vector<float> first, second;  // the two allreduce buffers; alive until the Work is done
};

PowerSgdHook::PowerSgdHook(PowerSgdOptions options) : options_(options) {
  COHORT_CHECK_ARG(options.rank >= 1, "PowerSGD rank = ", options.rank, " must be >= 1");
  COHORT_CHECK_ARG(options.start_step >= 0, "PowerSGD start_step = ", options.start_step,
                   " must be >= 0");
  COHORT_CHECK_ARG(options.min_compression_rate > 0,
                   "PowerSGD min_compression_rate = ", options.min_compression_rate,
                   " must be > 0");
}

PowerSgdHook::~PowerSgdHook() = default;

PowerSgdHook::Plan& PowerSgdHook::plan_for(const GradBucket& b) {
  if (b.index >= plans_.size()) plans_.resize(b.index + 1);
  if (!plans_[b.index]) plans_[b.index] = std::make_unique<Plan>();
  Plan& plan = *plans_[b.index];
  if (plan.params == b.parameters && plan.offsets == b.offsets && plan.numel == b.numel)
    return plan;
  plan = Plan{.params = b.parameters, .offsets = b.offsets, .numel = b.numel};
  size_t first = 0, second = 0;
  for (size_t j = 0; j < b.parameters.size(); ++j) {
    Entry e{.name = b.parameters[j], .lo = b.offsets[j]};
    e.numel = (j + 1 < b.offsets.size() ? b.offsets[j + 1] : b.numel) - e.lo;
    e.matrix = low_rank::plan_matrix(b.shapes.at(j), options_.rank, options_.min_compression_rate);
    e.p_at = first;
    e.q_at = second;
    first += e.matrix.rank ? size_t(e.matrix.rows) * size_t(e.matrix.rank) : e.numel;
    second += size_t(e.matrix.cols) * size_t(e.matrix.rank);
    e.state = &matrices_[e.name];
    plan.entries.push_back(std::move(e));
  }
  plan.first.resize(first);
  plan.second.resize(second);
  return plan;
}

// Standard normal values for every `stride`-th element of q from the shared seed, the
// parameter's name and `stream`: equal on every rank.
void PowerSgdHook::fill_normal(const Entry& e, std::span<float> q, int64_t stride,
                               uint64_t stream) const {
  Philox rng(derive_seed(options_.seed, e.name.c_str()));
  for (size_t i = 0; i < q.size(); i += size_t(stride)) q[i] = rng.normal(i, stream);
}

// Q for this step, orthogonalized (PyTorch does both): drawn on first use (and every step
// without warm start), else the last step's average. A column that is zero (a step whose M
// was zero on every rank zeroes it, and a warm start would keep it so for good) is redrawn
// from the step's stream, the same on every rank.
void PowerSgdHook::start_q(const Entry& e, Matrix& m) const {
  const auto& [rows, cols, rank] = e.matrix;
  size_t n = size_t(cols) * size_t(rank);
  if (!options_.warm_start || m.q.size() != n) {
    m.q.resize(n);
    fill_normal(e, m.q, 1, options_.warm_start ? 0 : steps_);
  }
  if (low_rank::orthogonalize_columns(m.q.data(), cols, rank)) return;
  for (int j = 0; j < rank; ++j) {
    // Lost: all zero, or not finite (a step whose gradient overflowed left NaN in the warm Q).
    bool zero = true, finite = true;
    for (int64_t k = 0; k < cols; ++k) {
      const float v = m.q[size_t(k * rank + j)];
      zero = zero && v == 0.0f;
      finite = finite && std::isfinite(v);
    }
    uint64_t stream = steps_ << 16 | uint64_t(j + 1);  // its own draw for every column
    if (zero || !finite) fill_normal(e, std::span<float>(m.q).subspan(size_t(j)), rank, stream);
  }
  low_rank::orthogonalize_columns(m.q.data(), cols, rank);
}

comm::Work PowerSgdHook::run(comm::ProcessGroup& g, const GradBucket& b) {
  if (b.index == 0) {
    ++steps_;
    meter_.count_step();
  }
  meter_.add_raw_bytes(b.numel * sizeof(float));
  if (steps_ <= uint64_t(options_.start_step)) {  // warm-up: a plain average
    meter_.add_message_bytes(b.numel * sizeof(float));
    return g.allreduce_async({.output = b.data,
                              .count = b.numel,
                              .dtype = comm::DType::f32,
                              .op = comm::ReduceOp::avg,
                              .timeout = b.timeout});
  }
  return send_p(g, b, plan_for(b));
}

// Step 2: M = grad (+ residual); the first buffer gets the uncompressed values and every P = M Q.
comm::Work PowerSgdHook::send_p(comm::ProcessGroup& g, const GradBucket& b, Plan& plan) {
  auto t0 = Clock::now();
  for (Entry& e : plan.entries) {
    float* grad = b.data + e.lo;
    float* out = plan.first.data() + e.p_at;
    if (e.matrix.rank == 0) {
      std::copy_n(grad, e.numel, out);
      continue;
    }
    const float* m = grad;
    if (options_.error_feedback) {
      std::vector<float>& r = e.state->residual;
      COHORT_CHECK_ARG(r.empty() || r.size() == e.numel, "PowerSGD: the residual of '", e.name,
                       "' holds ", r.size(), " values, the parameter ", e.numel,
                       " (a checkpoint of another model?)");
      r.resize(e.numel, 0.0f);
      for (size_t i = 0; i < e.numel; ++i) r[i] += grad[i];
      m = r.data();
    }
    start_q(e, *e.state);
    const auto& [rows, cols, rank] = e.matrix;
    cpu::sgemm(rows, rank, cols, 1.0f, MatRef{m, cols}, MatRef{e.state->q.data(), rank}, 0.0f, out,
               rank);
  }
  meter_.add_encode_seconds(seconds_since(t0));
  meter_.add_message_bytes((plan.first.size() + plan.second.size()) * sizeof(float));
  return g
      .allreduce_async({.output = plan.first.data(),
                        .count = plan.first.size(),
                        .dtype = comm::DType::f32,
                        .op = comm::ReduceOp::sum,
                        .timeout = b.timeout})
      .then([this, &g, &b, &plan] { return send_q(g, b, plan); });
}

// Step 3: the uncompressed average goes into the bucket; P orthogonalized; Q = M^T P.
comm::Work PowerSgdHook::send_q(comm::ProcessGroup& g, const GradBucket& b, Plan& plan) {
  auto t0 = Clock::now();
  const float inv_world = 1.0f / float(g.size());
  for (Entry& e : plan.entries) {
    float* p = plan.first.data() + e.p_at;
    if (e.matrix.rank == 0) {
      for (size_t i = 0; i < e.numel; ++i) b.data[e.lo + i] = p[i] * inv_world;
      continue;
    }
    const auto& [rows, cols, rank] = e.matrix;
    low_rank::orthogonalize_columns(p, rows, rank);
    const float* m = options_.error_feedback ? e.state->residual.data() : b.data + e.lo;
    cpu::sgemm(cols, rank, rows, 1.0f, MatRef{m, cols, Trans::kYes}, MatRef{p, rank}, 0.0f,
               plan.second.data() + e.q_at, rank);
  }
  meter_.add_encode_seconds(seconds_since(t0));
  if (plan.second.empty()) return finished();  // nothing was factorized
  int world = g.size();
  return g
      .allreduce_async({.output = plan.second.data(),
                        .count = plan.second.size(),
                        .dtype = comm::DType::f32,
                        .op = comm::ReduceOp::sum,
                        .timeout = b.timeout})
      .then([this, &b, &plan, world] {
        finish(b, plan, world);
        return finished();
      });
}

// Step 4: Q averaged (kept for the warm start); the bucket gets P Q^T; the residual M - P Q^T.
void PowerSgdHook::finish(const GradBucket& b, Plan& plan, int world) {
  auto t0 = Clock::now();
  const float inv_world = 1.0f / float(world);
  for (Entry& e : plan.entries) {
    if (e.matrix.rank == 0) continue;
    const auto& [rows, cols, rank] = e.matrix;
    float* q = plan.second.data() + e.q_at;
    for (size_t i = 0; i < size_t(cols) * size_t(rank); ++i) q[i] *= inv_world;
    std::copy_n(q, e.state->q.size(), e.state->q.begin());
    float* out = b.data + e.lo;
    cpu::sgemm(rows, cols, rank, 1.0f, MatRef{plan.first.data() + e.p_at, rank},
               MatRef{q, rank, Trans::kYes}, 0.0f, out, cols);
    if (!options_.error_feedback) continue;
    std::vector<float>& r = e.state->residual;
    for (size_t i = 0; i < e.numel; ++i) r[i] -= out[i];
  }
  meter_.add_decode_seconds(seconds_since(t0));
}

std::vector<float> PowerSgdHook::q_of(const std::string& name) const {
  auto it = matrices_.find(name);
  return it == matrices_.end() ? std::vector<float>{} : it->second.q;
}

std::vector<float> PowerSgdHook::residual_of(const std::string& name) const {
  auto it = matrices_.find(name);
  return it == matrices_.end() ? std::vector<float>{} : it->second.residual;
}

// "q/<parameter>" and "residual/<parameter>" tensors, the step count and the rank; per rank
// with error feedback (the residuals differ between ranks; the Qs are equal).
StrategyState PowerSgdHook::state() const {
  StrategyState st;
  for (const auto& [name, m] : matrices_) {
    if (!m.q.empty()) st.tensors.emplace_back("q/" + name, from_vector(m.q, {int64_t(m.q.size())}));
    if (!m.residual.empty()) {
      st.tensors.emplace_back("residual/" + name,
                              from_vector(m.residual, {int64_t(m.residual.size())}));
    }
  }
  st.values = {{"steps", steps_}, {"rank", options_.rank}};
  st.per_rank = options_.error_feedback;
  return st;
}

void PowerSgdHook::load_state(const StrategyState& st) {
  int saved_rank = st.values.value("rank", options_.rank);
  COHORT_CHECK_ARG(saved_rank == options_.rank, "the checkpoint's PowerSGD state has rank ",
                   saved_rank, ", this run asks for ", options_.rank,
                   " (ddp.powersgd_rank must match to resume)");
  matrices_.clear();
  plans_.clear();
  steps_ = st.values.value("steps", uint64_t(0));
  for (const auto& [key, t] : st.tensors) {
    size_t slash = key.find('/');
    std::string kind = key.substr(0, slash);
    COHORT_CHECK_ARG(slash != std::string::npos && (kind == "q" || kind == "residual"),
                     "PowerSGD: unexpected state tensor '", key,
                     "' (expected q/<parameter> or residual/<parameter>)");
    Matrix& m = matrices_[key.substr(slash + 1)];
    (kind == "q" ? m.q : m.residual) = t.to_vector<float>();
  }
}

}  // namespace cohort::parallel
