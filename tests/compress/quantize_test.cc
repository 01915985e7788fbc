// The quantizing compressors (compress/quantize.h): signSGD's message and its error feedback,
// QSGD's unbiased stochastic rounding and its level bound.
#include "cohort/compress/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cohort/core/error.h"

namespace cohort::compress {
namespace {

TEST(SignSgd, SendsTheSignsAndTheMeanMagnitudeAndKeepsTheRestWithErrorFeedback) {
  auto c = make_compressor({.method = Method::kSign});
  const std::vector<float> g{0.5f, -1.5f, 2.0f, -0.5f, 0.5f};  // mean |g| = 1
  std::vector<uint8_t> msg(c->message_bytes(g.size()));
  EXPECT_EQ(msg.size(), 5u);  // 4 + one byte of bits
  Residual r;
  c->encode(g, msg, {.scale = 0.5f}, &r);
  std::vector<float> out(g.size(), 0.0f);
  c->decode_add(msg, {}, out);
  EXPECT_EQ(out, (std::vector<float>{0.5f, -0.5f, 0.5f, -0.5f, 0.5f}));  // scale * 1 * sign
  // The residual holds g - (unscaled) sent: what the next step's gradient adds to.
  EXPECT_FLOAT_EQ(r.values()[0], -0.5f);
  EXPECT_FLOAT_EQ(r.values()[1], -0.5f);
  EXPECT_FLOAT_EQ(r.values()[2], 1.0f);
  EXPECT_FLOAT_EQ(r.values()[3], 0.5f);
  EXPECT_FLOAT_EQ(r.values()[4], -0.5f);
}

TEST(Qsgd, IsUnbiasedOverManyDrawsAndKeepsItsLevels) {
  auto c = make_compressor({.method = Method::kQsgd, .seed = 7, .levels = 4});
  const std::vector<float> g{0.3f, -0.1f, 0.05f, 0.0f, -0.9f, 0.2f};
  std::vector<uint8_t> msg(c->message_bytes(g.size()));
  EXPECT_EQ(msg.size(), 4 + g.size());  // one chunk: its norm, then a byte per value
  std::vector<double> mean(g.size(), 0.0);
  constexpr int kDraws = 20000;
  for (int round = 0; round < kDraws; ++round) {
    c->encode(g, msg, {.round = uint64_t(round)}, nullptr);
    for (size_t i = 0; i < g.size(); ++i) {
      const auto q = int8_t(msg[4 + i]);
      EXPECT_LE(std::abs(int(q)), 4);
    }
    std::vector<float> out(g.size(), 0.0f);
    c->decode_add(msg, {}, out);
    for (size_t i = 0; i < g.size(); ++i) mean[i] += out[i] / kDraws;
  }
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(mean[i], g[i], 0.01) << i;
  // The largest value is exactly representable (level s): no randomness there.
  c->encode(g, msg, {.round = 3}, nullptr);
  EXPECT_EQ(int8_t(msg[4 + 4]), -4);
  EXPECT_EQ(int8_t(msg[4 + 3]), 0);
}

// Every chunk of kQsgdChunk values has its own norm: a large vector's small chunk is not
// swamped by another chunk's large values.
TEST(Qsgd, ChunksHaveTheirOwnNorms) {
  auto c = make_compressor({.method = Method::kQsgd, .levels = 4});
  std::vector<float> g(kQsgdChunk + 3, 1e-3f);
  for (size_t i = 0; i < kQsgdChunk; ++i) g[i] = 100.0f;
  std::vector<uint8_t> msg(c->message_bytes(g.size()));
  EXPECT_EQ(msg.size(), g.size() + 8);
  c->encode(g, msg, {}, nullptr);
  std::vector<float> out(g.size(), 0.0f);
  c->decode_add(msg, {}, out);
  for (size_t i = kQsgdChunk; i < g.size(); ++i) EXPECT_NEAR(out[i], 1e-3f, 1e-3f) << i;
}

TEST(Qsgd, LevelsOutsideASignedByteAreRefused) {
  EXPECT_THROW(make_compressor({.method = Method::kQsgd, .levels = 0}), InvalidArgument);
  EXPECT_THROW(make_compressor({.method = Method::kQsgd, .levels = 128}), InvalidArgument);
  EXPECT_EQ(parse_method("qsgd", "ddp.compression"), Method::kQsgd);
  EXPECT_EQ(parse_method("signsgd", "ddp.compression"), Method::kSign);
}

}  // namespace
}  // namespace cohort::compress
