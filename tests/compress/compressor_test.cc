// The gradient codecs (compress/): round trips, which entries the sparsifiers send, shared
// random-k indices, and the error-feedback invariant.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "cohort/compress/compressor.h"
#include "cohort/compress/sparse.h"
#include "cohort/core/error.h"
#include "cohort/core/rng.h"

namespace cohort::compress {
namespace {

std::vector<float> normal_values(size_t n, uint64_t seed, float scale = 1.0f) {
  Philox rng(seed);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * rng.normal(i);
  return v;
}

std::vector<float> round_trip(Compressor& c, const std::vector<float>& in, CodecContext ctx = {}) {
  std::vector<uint8_t> msg(c.message_bytes(in.size()));
  c.encode(in, msg, ctx, nullptr);
  std::vector<float> out(in.size(), 0.0f);
  c.decode_add(msg, ctx, out);
  return out;
}

TEST(CastCompressor, ValuesThatFitTheFormatComeBackExactly) {
  // Small integers, powers of two and halves are exact in both formats.
  std::vector<float> v = {0.0f, 1.0f, -2.0f, 0.5f, 0.25f, -96.0f, 1024.0f, -0.125f, 3.0f};
  for (Method m : {Method::kFp16, Method::kBf16}) {
    auto c = make_compressor({.method = m});
    EXPECT_EQ(c->message_bytes(v.size()), 2 * v.size());
    EXPECT_EQ(round_trip(*c, v), v) << method_name(m);
  }
}

TEST(CastCompressor, OtherValuesComeBackWithinTheFormatsPrecision) {
  auto v = normal_values(1000, 3);
  for (auto [m, eps] : {std::pair{Method::kFp16, 1.0f / 2048}, {Method::kBf16, 1.0f / 256}}) {
    auto c = make_compressor({.method = m});
    auto out = round_trip(*c, v);
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_LE(std::fabs(out[i] - v[i]), eps * std::fabs(v[i]) + 1e-7f) << method_name(m) << i;
  }
}

TEST(CastCompressor, Fp16ScalesBeforeTheCastAndSaturatesInsteadOfOverflowing) {
  auto c = make_compressor({.method = Method::kFp16});
  // 160000 overflows fp16; scaled by 1/4 it fits (40000 = 1250 * 32 is exact).
  EXPECT_EQ(round_trip(*c, {160000.0f}, {.scale = 0.25f})[0], 40000.0f);
  EXPECT_EQ(round_trip(*c, {-1e9f})[0], -65504.0f);
  EXPECT_TRUE(std::isnan(round_trip(*c, {NAN})[0]));
}

// The vectorised conversion (F16C, where the CPU has it) rounds exactly as the scalar one.
TEST(CastCompressor, Fp16MessagesAreBitIdenticalToTheScalarConversion) {
  std::vector<float> v = normal_values(1003, 8, 1e-3f);  // not a multiple of 8: a scalar tail
  auto big = normal_values(1003, 9, 3e4f);
  auto tiny = normal_values(1003, 10, 1e-6f);  // fp16 subnormals
  v.insert(v.end(), big.begin(), big.end());
  v.insert(v.end(), tiny.begin(), tiny.end());
  v.push_back(NAN);
  v.push_back(-INFINITY);
  auto c = make_compressor({.method = Method::kFp16});
  std::vector<uint8_t> msg(c->message_bytes(v.size()));
  c->encode(v, msg, {.scale = 0.5f}, nullptr);
  std::vector<float> out(v.size(), 1.0f);
  c->decode_add(msg, {}, out);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t want = float_to_half(std::clamp(v[i] * 0.5f, -65504.0f, 65504.0f));
    uint16_t got;
    std::memcpy(&got, msg.data() + 2 * i, 2);
    if (std::isnan(v[i])) {
      EXPECT_TRUE(std::isnan(half_to_float(got)));
      continue;
    }
    ASSERT_EQ(got, want) << "value " << v[i] << " at " << i;
    ASSERT_EQ(out[i], 1.0f + half_to_float(want)) << i;
  }
}

TEST(TopK, KeepsExactlyTheKLargestMagnitudes) {
  auto v = normal_values(1000, 5);
  size_t k = sparse_k(v.size(), 0.05);
  EXPECT_EQ(k, 50u);
  auto idx = select_top_k(v, k);
  ASSERT_EQ(idx.size(), k);
  EXPECT_TRUE(std::is_sorted(idx.begin(), idx.end()));
  std::vector<float> mags;
  for (float x : v) mags.push_back(std::fabs(x));
  std::sort(mags.rbegin(), mags.rend());
  float threshold = mags[k - 1];
  std::set<uint32_t> chosen(idx.begin(), idx.end());
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(chosen.count(uint32_t(i)) == 1, std::fabs(v[i]) >= threshold) << i;

  // The decoded message is v at those indices and zero elsewhere.
  auto c = make_compressor({.method = Method::kTopK, .ratio = 0.05});
  EXPECT_EQ(c->message_bytes(v.size()), k * 8);
  auto out = round_trip(*c, v);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(out[i], chosen.count(uint32_t(i)) ? v[i] : 0.0f);
}

TEST(TopK, TiesGoToTheLowerIndex) {
  EXPECT_EQ(select_top_k(std::vector<float>{1, -3, 3, 2, 3}, 2), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(select_top_k(std::vector<float>{0, 0, 0}, 3), (std::vector<uint32_t>{0, 1, 2}));
}

// Against the definition (sort by magnitude descending, then index), on values with many ties.
TEST(TopK, MatchesASortedReferenceWithManyTies) {
  Philox rng(4);
  for (size_t n : {1u, 7u, 64u, 1000u}) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = float(int(rng.uniform(i) * 9.0f) - 4);  // -4 .. 4
    for (size_t k : {size_t(1), n / 3, n}) {
      if (k == 0) continue;
      std::vector<uint32_t> order(n);
      for (size_t i = 0; i < n; ++i) order[i] = uint32_t(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](uint32_t a, uint32_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
      std::vector<uint32_t> want(order.begin(), order.begin() + ptrdiff_t(k));
      std::sort(want.begin(), want.end());
      ASSERT_EQ(select_top_k(v, k), want) << "n " << n << " k " << k;
    }
  }
}

TEST(RandomK, PicksKDistinctIndicesFromTheSeedAndRoundAlone) {
  auto a = select_random_k(1000, 100, 42, 7);
  ASSERT_EQ(a.size(), 100u);
  EXPECT_EQ(std::set<uint32_t>(a.begin(), a.end()).size(), 100u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_LT(a.back(), 1000u);
  EXPECT_EQ(select_random_k(1000, 100, 42, 7), a);  // another rank, same seed and round
  EXPECT_NE(select_random_k(1000, 100, 42, 8), a);  // the next step: other indices
  EXPECT_NE(select_random_k(1000, 100, 43, 7), a);
  EXPECT_EQ(select_random_k(5, 5, 1, 0), (std::vector<uint32_t>{0, 1, 2, 3, 4}));
}

TEST(RandomK, EveryIndexIsDrawnAboutEquallyOften) {
  std::vector<int> hits(50, 0);
  for (uint64_t round = 0; round < 2000; ++round)
    for (uint32_t i : select_random_k(50, 5, 9, round)) ++hits[i];
  for (int h : hits) EXPECT_NEAR(h, 200, 60);  // 2000 * 5 / 50, a few standard deviations
}

TEST(RandomK, MessagesOfTwoRanksSumAtTheSharedIndices) {
  auto c = make_compressor({.method = Method::kRandomK, .ratio = 0.1, .seed = 11});
  auto a = normal_values(200, 1), b = normal_values(200, 2);
  CodecContext ctx{.round = 3, .scale = 0.5f};
  std::vector<uint8_t> ma(c->message_bytes(200)), mb(ma.size());
  EXPECT_EQ(ma.size(), 20u * 4);
  c->encode(a, ma, ctx, nullptr);
  c->encode(b, mb, ctx, nullptr);
  auto* fa = reinterpret_cast<float*>(ma.data());
  auto* fb = reinterpret_cast<const float*>(mb.data());
  for (size_t j = 0; j < 20; ++j) fa[j] += fb[j];  // what allreduce(sum) does on the wire
  std::vector<float> out(200, 0.0f);
  c->decode_add(ma, ctx, out);
  auto idx = select_random_k(200, 20, 11, 3);
  std::set<uint32_t> chosen(idx.begin(), idx.end());
  for (size_t i = 0; i < 200; ++i) {
    float want = chosen.count(uint32_t(i)) ? 0.5f * a[i] + 0.5f * b[i] : 0.0f;
    EXPECT_FLOAT_EQ(out[i], want) << i;
  }
}

// Stich et al.: over steps, sum of what was sent + residual == sum of the gradients.
TEST(ErrorFeedback, SentPlusResidualIsTheSumOfGradients) {
  for (Method m : {Method::kTopK, Method::kRandomK, Method::kFp16}) {
    auto c = make_compressor({.method = m, .ratio = 0.1, .seed = 5});
    Residual r;
    std::vector<double> grads(300, 0.0), sent(300, 0.0);
    for (uint64_t step = 0; step < 20; ++step) {
      auto g = normal_values(300, 100 + step);
      for (size_t i = 0; i < g.size(); ++i) grads[i] += g[i];
      std::vector<uint8_t> msg(c->message_bytes(g.size()));
      c->encode(g, msg, {.round = step}, &r);
      std::vector<float> out(g.size(), 0.0f);
      c->decode_add(msg, {.round = step}, out);
      for (size_t i = 0; i < g.size(); ++i) sent[i] += out[i];
    }
    ASSERT_EQ(r.values().size(), 300u);
    for (size_t i = 0; i < 300; ++i)
      ASSERT_NEAR(sent[i] + r.values()[i], grads[i], 1e-4) << method_name(m) << " " << i;
  }
}

TEST(ErrorFeedback, TopKWithFeedbackEventuallySendsEveryCoordinate) {
  auto c = make_compressor({.method = Method::kTopK, .ratio = 0.1});
  Residual r;
  std::vector<float> g(100, 0.0f);
  g[0] = 10.0f;  // one large coordinate, the rest small and steady
  for (size_t i = 1; i < g.size(); ++i) g[i] = 0.01f;
  std::vector<bool> ever(100, false);
  for (int step = 0; step < 200; ++step) {
    std::vector<uint8_t> msg(c->message_bytes(g.size()));
    c->encode(g, msg, {}, &r);
    std::vector<float> out(g.size(), 0.0f);
    c->decode_add(msg, {}, out);
    for (size_t i = 0; i < g.size(); ++i) ever[i] = ever[i] || out[i] != 0.0f;
  }
  EXPECT_EQ(std::count(ever.begin(), ever.end(), true), 100);
}

TEST(Compressor, BadArgumentsAreClearErrors) {
  EXPECT_THROW(make_compressor({.method = Method::kNone}), InvalidArgument);
  EXPECT_THROW(make_compressor({.method = Method::kTopK, .ratio = 0.0}), InvalidArgument);
  EXPECT_THROW(make_compressor({.method = Method::kRandomK, .ratio = 1.5}), InvalidArgument);
  auto c = make_compressor({.method = Method::kFp16});
  std::vector<uint8_t> wrong(3);
  std::vector<float> v(4, 1.0f);
  EXPECT_THROW(c->encode(v, wrong, {}, nullptr), InvalidArgument);
  try {
    parse_method("fp8", "ddp.compression");
    ADD_FAILURE() << "fp8 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ddp.compression = \"fp8\""), std::string::npos);
  }
  EXPECT_EQ(parse_method("randomk", "k"), Method::kRandomK);
  // A top-k message naming an index outside the vector (corrupt, or another size).
  auto t = make_compressor({.method = Method::kTopK, .ratio = 0.5});
  std::vector<uint8_t> msg(t->message_bytes(2));
  uint32_t bad = 7;
  std::memcpy(msg.data(), &bad, 4);
  std::vector<float> out(2, 0.0f);
  EXPECT_THROW(t->decode_add(msg, {}, out), InvalidArgument);
}

}  // namespace
}  // namespace cohort::compress
