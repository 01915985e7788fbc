#include "cohort/parallel/decentralized/choco_gossip.h"

#include <algorithm>

#include "cohort/core/error.h"

namespace cohort::parallel {

double default_consensus_step(const compress::CompressorOptions& codec) {
  using compress::Method;
  switch (codec.method) {
    case Method::kFp16:
    case Method::kBf16:
      return 1.0;
    case Method::kTopK:
      return std::min(0.3, 2 * codec.ratio);
    case Method::kRandomK:
      return codec.ratio / 2;
    case Method::kQsgd:
      return 0.3;
    case Method::kSign:
    case Method::kNone:
      break;
  }
  return 0.5;
}

ChocoGossip::ChocoGossip(const ChocoOptions& options, size_t numel, size_t neighbours)
    : codec_(compress::make_compressor(options.codec)),
      gamma_(options.gamma),
      self_(numel),
      peers_(neighbours, std::vector<float>(numel)),
      diff_(numel),
      outbox_(codec_->message_bytes(numel)),
      inbox_(neighbours, std::vector<uint8_t>(outbox_.size())) {
  COHORT_CHECK_ARG(gamma_ > 0 && gamma_ <= 1, "gossip.consensus_step = ", gamma_,
                   " is outside (0, 1]");
}

void ChocoGossip::reset(std::span<const float> x) {
  COHORT_CHECK_ARG(x.empty() || x.size() == self_.size(), "choco: reset with ", x.size(),
                   " values, expected ", self_.size());
  auto fill = [&](std::vector<float>& v) {
    if (x.empty()) std::fill(v.begin(), v.end(), 0.0f);
    if (!x.empty()) std::copy(x.begin(), x.end(), v.begin());
  };
  fill(self_);
  for (auto& p : peers_) fill(p);
}

std::span<const uint8_t> ChocoGossip::encode(std::span<const float> x, uint64_t round) {
  COHORT_CHECK_ARG(x.size() == self_.size(), "choco: encode of ", x.size(), " values, expected ",
                   self_.size());
  for (size_t i = 0; i < x.size(); ++i) diff_[i] = x[i] - self_[i];
  // No residual: x - x_hat already carries forward whatever the last message left out.
  codec_->encode(diff_, outbox_, {.round = round}, nullptr);
  return outbox_;
}

void ChocoGossip::update(uint64_t round) {
  // Our own message decoded as the neighbours decode it, so every copy of x_hat_i agrees.
  codec_->decode_add(outbox_, {.round = round}, self_);
  for (size_t k = 0; k < peers_.size(); ++k)
    codec_->decode_add(inbox_[k], {.round = round}, peers_[k]);
}

void ChocoGossip::pull(std::span<float> x, size_t at, double w) const {
  if (peers_.empty()) return;
  const float step = float(gamma_ * w);
  for (size_t i = 0; i < x.size(); ++i) {
    float sum = 0;  // sum over neighbours of (x_hat_j - x_hat_i)
    for (const auto& p : peers_) sum += p[at + i] - self_[at + i];
    x[i] += step * sum;
  }
}

}  // namespace cohort::parallel
