#include "cohort/compress/codecs.h"

#include <algorithm>
#include <cstring>

#include "cohort/compress/sparse.h"
#include "cohort/core/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define COHORT_F16C 1
#endif

namespace cohort::compress {
namespace {

constexpr float kHalfMax = 65504.0f;

#ifdef COHORT_F16C
// The hardware conversions (F16C: every x86-64 since 2012), 8 values at a time; the same
// round-to-nearest-even as float_to_half, so results do not depend on which path ran. Each
// returns how many leading values it converted (a multiple of 8); the caller does the rest.
bool have_f16c() {
  static const bool ok = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return ok;
}

__attribute__((target("avx,f16c"))) size_t to_half_f16c(const float* in, float scale, uint16_t* out,
                                                        size_t n) {
  const __m256 s = _mm256_set1_ps(scale), lo = _mm256_set1_ps(-kHalfMax),
               hi = _mm256_set1_ps(kHalfMax);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(in + i), s);
    v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));  // NaN (second operand) passes through
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return i;
}

__attribute__((target("avx,f16c"))) size_t add_from_half_f16c(const uint16_t* in, float* out,
                                                              size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 h = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), h));
  }
  return i;
}
#endif

// The sent values of `in` at `idx`, scaled, into `out`; then unsent = in with those zeroed.
void take_entries(std::span<const float> in, const std::vector<uint32_t>& idx, float scale,
                  float* out, std::span<float> unsent) {
  for (size_t j = 0; j < idx.size(); ++j) out[j] = in[idx[j]] * scale;
  if (unsent.empty()) return;
  if (unsent.data() != in.data()) std::copy(in.begin(), in.end(), unsent.begin());
  for (uint32_t i : idx) unsent[i] = 0.0f;
}

void check_ratio(double ratio, const char* method) {
  COHORT_CHECK_ARG(ratio > 0 && ratio <= 1, "compress ", method, ": ratio ", ratio,
                   " is outside (0, 1]");
}

}  // namespace

CastCompressor::CastCompressor(DType dtype) : dtype_(dtype) {
  COHORT_CHECK_ARG(dtype == DType::f16 || dtype == DType::bf16,
                   "CastCompressor: casts to f16 or bf16, not ", dtype_short_name(dtype));
}

uint16_t CastCompressor::to_bits(float x) const {
  if (dtype_ == DType::bf16) return float_to_bf16(x);
  return float_to_half(std::clamp(x, -kHalfMax, kHalfMax));  // NaN stays NaN
}

float CastCompressor::from_bits(uint16_t b) const {
  return dtype_ == DType::bf16 ? bf16_to_float(b) : half_to_float(b);
}

void CastCompressor::encode_values(std::span<const float> in, std::span<uint8_t> message,
                                   const CodecContext& ctx, std::span<float> unsent) {
  auto* bits = reinterpret_cast<uint16_t*>(message.data());  // vector storage: aligned
  size_t i = 0;
#ifdef COHORT_F16C
  if (dtype_ == DType::f16 && have_f16c()) i = to_half_f16c(in.data(), ctx.scale, bits, in.size());
#endif
  if (dtype_ == DType::bf16) {  // branch-free: the compiler vectorises it
    for (; i < in.size(); ++i) bits[i] = float_to_bf16(in[i] * ctx.scale);
  }
  for (; i < in.size(); ++i) bits[i] = to_bits(in[i] * ctx.scale);
  if (unsent.empty()) return;
  for (size_t i = 0; i < in.size(); ++i) unsent[i] = in[i] - from_bits(bits[i]) / ctx.scale;
}

void CastCompressor::decode_add(std::span<const uint8_t> message, const CodecContext& ctx,
                                std::span<float> out) const {
  check_message(message.size(), out.size(), "decode");
  const auto* bits = reinterpret_cast<const uint16_t*>(message.data());
  size_t i = 0;
#ifdef COHORT_F16C
  if (dtype_ == DType::f16 && have_f16c()) i = add_from_half_f16c(bits, out.data(), out.size());
#endif
  if (dtype_ == DType::bf16) {
    for (; i < out.size(); ++i) out[i] += bf16_to_float(bits[i]);
  }
  for (; i < out.size(); ++i) out[i] += from_bits(bits[i]);
}

TopKCompressor::TopKCompressor(double ratio) : ratio_(ratio) {
  check_ratio(ratio, "topk");
}

size_t TopKCompressor::message_bytes(size_t numel) const {
  return sparse_k(numel, ratio_) * (sizeof(uint32_t) + sizeof(float));
}

void TopKCompressor::encode_values(std::span<const float> in, std::span<uint8_t> message,
                                   const CodecContext& ctx, std::span<float> unsent) {
  std::vector<uint32_t> idx = select_top_k(in, sparse_k(in.size(), ratio_));
  std::memcpy(message.data(), idx.data(), idx.size() * sizeof(uint32_t));
  std::vector<float> values(idx.size());
  take_entries(in, idx, ctx.scale, values.data(), unsent);
  std::memcpy(message.data() + idx.size() * sizeof(uint32_t), values.data(),
              values.size() * sizeof(float));
}

void TopKCompressor::decode_add(std::span<const uint8_t> message, const CodecContext& ctx,
                                std::span<float> out) const {
  check_message(message.size(), out.size(), "decode");
  size_t k = sparse_k(out.size(), ratio_);
  for (size_t j = 0; j < k; ++j) {
    uint32_t i;
    float v;
    std::memcpy(&i, message.data() + j * sizeof(uint32_t), sizeof i);
    std::memcpy(&v, message.data() + k * sizeof(uint32_t) + j * sizeof(float), sizeof v);
    COHORT_CHECK_ARG(i < out.size(), "compress topk decode: index ", i, " outside the ", out.size(),
                     " values (a corrupt or mismatched message)");
    out[i] += v;
  }
}

RandomKCompressor::RandomKCompressor(double ratio, uint64_t seed) : ratio_(ratio), seed_(seed) {
  check_ratio(ratio, "randomk");
}

size_t RandomKCompressor::message_bytes(size_t numel) const {
  return sparse_k(numel, ratio_) * sizeof(float);
}

void RandomKCompressor::encode_values(std::span<const float> in, std::span<uint8_t> message,
                                      const CodecContext& ctx, std::span<float> unsent) {
  auto idx = select_random_k(in.size(), sparse_k(in.size(), ratio_), seed_, ctx.round);
  take_entries(in, idx, ctx.scale, reinterpret_cast<float*>(message.data()), unsent);
}

void RandomKCompressor::decode_add(std::span<const uint8_t> message, const CodecContext& ctx,
                                   std::span<float> out) const {
  check_message(message.size(), out.size(), "decode");
  auto idx = select_random_k(out.size(), sparse_k(out.size(), ratio_), seed_, ctx.round);
  const auto* values = reinterpret_cast<const float*>(message.data());
  for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] += values[j];
}

}  // namespace cohort::compress
