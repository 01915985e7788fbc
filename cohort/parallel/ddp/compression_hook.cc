// CompressionHook (compression_hook.h): per-bucket state, the exchange paths, metrics.
#include "cohort/parallel/ddp/compression_hook.h"
#include "cohort/core/clock.h"

#include <chrono>

#include "cohort/compress/sparse.h"
#include "cohort/core/error.h"
#include "cohort/tensor/tensor.h"

namespace cohort::parallel {
namespace {

using Clock = std::chrono::steady_clock;

comm::Work finished(const char* name) {
  comm::Work w = comm::Work::pending(name);
  w.complete(nullptr);
  return w;
}

// Element range [begin, end) of parameter j in a bucket.
std::pair<size_t, size_t> slot(const std::vector<size_t>& offsets, size_t numel, size_t j) {
  return {offsets[j], j + 1 < offsets.size() ? offsets[j + 1] : numel};
}

}  // namespace

struct CompressionHook::BucketState {
  std::vector<std::string> params;
  std::vector<size_t> offsets;
  size_t numel = 0;
  uint64_t rounds = 0;  // steps this bucket index ran: random-k's round, equal on every rank
  compress::Residual residual;
  std::vector<uint8_t> message, gathered;  // alive until the bucket's Work is done
};

CompressionHook::CompressionHook(CompressionOptions options)
    : options_(options),
      codec_(compress::make_compressor({.method = options.method,
                                        .ratio = options.topk_ratio,
                                        .seed = options.seed,
                                        .levels = options.qsgd_levels})),
      error_feedback_(options.error_feedback && (options.method == compress::Method::kTopK ||
                                                 options.method == compress::Method::kRandomK ||
                                                 options.method == compress::Method::kSign)) {}

CompressionHook::~CompressionHook() = default;

std::string CompressionHook::name() const {
  return compress::method_name(options_.method);
}

// The state of bucket b.index, re-laid (residuals carried per parameter) when DDP changed
// which parameters the bucket holds.
CompressionHook::BucketState& CompressionHook::state_for(const GradBucket& b) {
  if (b.index >= buckets_.size()) buckets_.resize(b.index + 1);
  if (!buckets_[b.index]) buckets_[b.index] = std::make_unique<BucketState>();
  BucketState& s = *buckets_[b.index];
  if (s.params == b.parameters && s.offsets == b.offsets && s.numel == b.numel) return s;
  stash_residuals();
  s.params = b.parameters;
  s.offsets = b.offsets;
  s.numel = b.numel;
  if (!error_feedback_ || stashed_.empty()) return s;
  std::vector<float> r(b.numel, 0.0f);
  for (size_t j = 0; j < b.parameters.size(); ++j) {
    auto it = stashed_.find(b.parameters[j]);
    if (it == stashed_.end()) continue;
    auto [lo, hi] = slot(b.offsets, b.numel, j);
    std::copy_n(it->second.begin(), std::min(hi - lo, it->second.size()),
                r.begin() + ptrdiff_t(lo));
    stashed_.erase(it);
  }
  s.residual.assign(std::move(r));
  return s;
}

// Moves every bucket's residual into stashed_, by parameter; the buckets re-lay on next use.
void CompressionHook::stash_residuals() {
  for (auto& p : buckets_) {
    if (!p) continue;
    auto values = p->residual.values();
    for (size_t j = 0; j < p->params.size() && !values.empty(); ++j) {
      auto [lo, hi] = slot(p->offsets, p->numel, j);
      stashed_[p->params[j]].assign(values.begin() + ptrdiff_t(lo), values.begin() + ptrdiff_t(hi));
    }
    p->residual.assign({});
    p->params.clear();
  }
}

bool CompressionHook::sparse_path(size_t numel, int world) const {
  if (options_.exchange != SparseExchange::kAuto)
    return options_.exchange == SparseExchange::kSparse;
  if (options_.method != compress::Method::kTopK)  // signsgd, qsgd: gather unless bigger
    return codec_->message_bytes(numel) * size_t(world) < numel * sizeof(float);
  return 2 * compress::sparse_k(numel, options_.topk_ratio) * size_t(world) < numel;
}

comm::Work CompressionHook::run(comm::ProcessGroup& g, const GradBucket& b) {
  auto t0 = Clock::now();
  BucketState& s = state_for(b);
  compress::CodecContext ctx{.round = s.rounds++, .scale = 1.0f / float(g.size())};
  s.message.resize(codec_->message_bytes(b.numel));
  codec_->encode({b.data, b.numel}, s.message, ctx, error_feedback_ ? &s.residual : nullptr);
  meter_.add_encode_seconds(seconds_since(t0));
  meter_.add_raw_bytes(b.numel * sizeof(float));
  if (b.index == 0) meter_.count_step();
  return exchange(g, b, s, ctx);
}

comm::Work CompressionHook::exchange(comm::ProcessGroup& g, const GradBucket& b, BucketState& s,
                                     const compress::CodecContext& ctx) {
  std::span<float> out(b.data, b.numel);
  auto decode_into_bucket = [this, out, ctx](std::span<const uint8_t> msg, size_t messages) {
    auto t = Clock::now();
    std::fill(out.begin(), out.end(), 0.0f);
    size_t bytes = msg.size() / messages;
    for (size_t k = 0; k < messages; ++k)
      codec_->decode_add(msg.subspan(k * bytes, bytes), ctx, out);
    meter_.add_decode_seconds(seconds_since(t));
    return finished("compress decode");
  };
  const size_t bytes = s.message.size();
  if (codec_->combine() == compress::Combine::kSum) {
    meter_.add_message_bytes(bytes);
    comm::AllreduceOptions o{.output = s.message.data(),
                             .count = bytes / dtype_size(codec_->wire_dtype()),
                             .dtype = codec_->wire_dtype(),
                             .timeout = b.timeout};
    std::span<const uint8_t> msg = s.message;
    return g.allreduce_async(o).then([=] { return decode_into_bucket(msg, 1); });
  }
  if (sparse_path(b.numel, g.size())) {
    meter_.add_message_bytes(bytes);
    s.gathered.resize(bytes * size_t(g.size()));
    comm::AllgatherOptions o{.input = s.message.data(),
                             .output = s.gathered.data(),
                             .count = bytes,
                             .dtype = comm::DType::u8,
                             .timeout = b.timeout};
    std::span<const uint8_t> all = s.gathered;
    size_t n = size_t(g.size());
    return g.allgather_async(o).then([=] { return decode_into_bucket(all, n); });
  }
  meter_.add_message_bytes(b.numel * sizeof(float));  // dense: the whole bucket travels
  decode_into_bucket(s.message, 1);
  return g.allreduce_async({.output = b.data, .count = b.numel, .timeout = b.timeout});
}

nlohmann::json CompressionHook::take_interval_metrics() {
  return meter_.take_interval();
}

nlohmann::json CompressionHook::summary_metrics() const {
  return meter_.summary(name());
}

}  // namespace cohort::parallel

namespace cohort::parallel {

std::vector<float> CompressionHook::residual_of(const std::string& name) const {
  for (const auto& p : buckets_) {
    if (!p || p->residual.values().empty()) continue;
    auto values = p->residual.values();
    for (size_t j = 0; j < p->params.size(); ++j) {
      if (p->params[j] != name) continue;
      auto [lo, hi] = slot(p->offsets, p->numel, j);
      return {values.begin() + ptrdiff_t(lo), values.begin() + ptrdiff_t(hi)};
    }
  }
  auto it = stashed_.find(name);
  return it == stashed_.end() ? std::vector<float>{} : it->second;
}

// Residuals as "residual/<parameter>" tensors and each bucket's round; per rank when there
// are residuals (they differ between ranks).
StrategyState CompressionHook::state() const {
  StrategyState st;
  std::vector<uint64_t> rounds;
  std::map<std::string, std::vector<float>> all = stashed_;
  for (const auto& p : buckets_) {
    rounds.push_back(p ? p->rounds : 0);
    if (!p) continue;
    for (const auto& name : p->params) {
      auto r = residual_of(name);
      if (!r.empty()) all[name] = std::move(r);
    }
  }
  for (auto& [name, r] : all) {
    int64_t n = int64_t(r.size());
    st.tensors.emplace_back("residual/" + name, from_vector(r, {n}));
  }
  st.values["rounds"] = rounds;
  st.per_rank = error_feedback_;
  return st;
}

void CompressionHook::load_state(const StrategyState& st) {
  auto rounds = st.values.value("rounds", std::vector<uint64_t>{});
  buckets_.clear();
  stashed_.clear();
  for (size_t b = 0; b < rounds.size(); ++b) {
    buckets_.push_back(std::make_unique<BucketState>());
    buckets_.back()->rounds = rounds[b];
  }
  const std::string prefix = "residual/";
  for (const auto& [name, t] : st.tensors) {
    COHORT_CHECK_ARG(name.rfind(prefix, 0) == 0, "compression hook '", this->name(),
                     "': unexpected state tensor '", name, "' (expected residual/<parameter>)");
    stashed_[name.substr(prefix.size())] = t.to_vector<float>();
  }
}

}  // namespace cohort::parallel
