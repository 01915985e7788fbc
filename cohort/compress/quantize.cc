#include "cohort/compress/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cohort/core/error.h"

namespace cohort::compress {
namespace {

float read_f32(std::span<const uint8_t> m) {
  float v;
  std::memcpy(&v, m.data(), sizeof v);
  return v;
}

void write_f32(std::span<uint8_t> m, float v) {
  std::memcpy(m.data(), &v, sizeof v);
}

// A uniform draw in [0, 1) from (seed, round, index): SplitMix64 of their mix.
float uniform(uint64_t seed, uint64_t round, uint64_t index) {
  uint64_t z = seed ^ (round * 0x9e3779b97f4a7c15ULL) ^ (index * 0xbf58476d1ce4e5b9ULL);
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return float(z >> 40) * (1.0f / float(1 << 24));
}

}  // namespace

void SignCompressor::encode_values(std::span<const float> in, std::span<uint8_t> message,
                                   const CodecContext& ctx, std::span<float> unsent) {
  double l1 = 0;
  for (float x : in) l1 += std::fabs(double(x));
  const float magnitude = in.empty() ? 0.0f : float(l1 / double(in.size()));
  write_f32(message, ctx.scale * magnitude);
  std::span<uint8_t> bits = message.subspan(4);
  std::fill(bits.begin(), bits.end(), uint8_t{0});
  for (size_t i = 0; i < in.size(); ++i) {
    const bool negative = std::signbit(in[i]);
    if (negative) bits[i / 8] |= uint8_t(1u << (i % 8));
    if (!unsent.empty()) unsent[i] = in[i] - (negative ? -magnitude : magnitude);
  }
}

void SignCompressor::decode_add(std::span<const uint8_t> message, const CodecContext&,
                                std::span<float> out) const {
  check_message(message.size(), out.size(), "decode");
  const float magnitude = read_f32(message);
  std::span<const uint8_t> bits = message.subspan(4);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] += (bits[i / 8] >> (i % 8)) & 1u ? -magnitude : magnitude;
}

QsgdCompressor::QsgdCompressor(int levels, uint64_t seed) : levels_(levels), seed_(seed) {
  COHORT_CHECK_ARG(levels >= 1 && levels <= 127, "qsgd: levels = ", levels,
                   " must be in [1, 127] (a level travels as a signed byte)");
}

// Chunk c of n values starts at byte c * (4 + kQsgdChunk): its norm, then its levels.
void QsgdCompressor::encode_values(std::span<const float> in, std::span<uint8_t> message,
                                   const CodecContext& ctx, std::span<float> unsent) {
  const float s = float(levels_);
  for (size_t begin = 0; begin < in.size(); begin += kQsgdChunk) {
    const size_t end = std::min(in.size(), begin + kQsgdChunk);
    uint8_t* chunk = message.data() + begin / kQsgdChunk * (4 + kQsgdChunk);
    double sq = 0;
    for (size_t i = begin; i < end; ++i) sq += double(in[i]) * double(in[i]);
    const float norm = float(std::sqrt(sq));
    const float scaled = ctx.scale * norm;
    std::memcpy(chunk, &scaled, 4);
    for (size_t i = begin; i < end; ++i) {
      const float r = norm > 0 ? std::fabs(in[i]) / norm * s : 0.0f;  // in [0, s]
      float level = std::floor(r);
      if (uniform(seed_, ctx.round, i) < r - level) level += 1;  // unbiased rounding
      level = std::min(level, s);
      const int8_t q = int8_t(std::signbit(in[i]) ? -level : level);
      std::memcpy(chunk + 4 + (i - begin), &q, 1);
      if (!unsent.empty()) unsent[i] = in[i] - norm * float(q) / s;
    }
  }
}

void QsgdCompressor::decode_add(std::span<const uint8_t> message, const CodecContext&,
                                std::span<float> out) const {
  check_message(message.size(), out.size(), "decode");
  for (size_t begin = 0; begin < out.size(); begin += kQsgdChunk) {
    const size_t end = std::min(out.size(), begin + kQsgdChunk);
    const uint8_t* chunk = message.data() + begin / kQsgdChunk * (4 + kQsgdChunk);
    float norm;
    std::memcpy(&norm, chunk, 4);
    const float unit = norm / float(levels_);
    for (size_t i = begin; i < end; ++i) {
      int8_t q;
      std::memcpy(&q, chunk + 4 + (i - begin), 1);
      out[i] += unit * float(q);
    }
  }
}

}  // namespace cohort::compress
