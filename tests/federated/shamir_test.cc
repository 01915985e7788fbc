// Shamir sharing over GF(2^61 - 1): any t of n shares give the secret back, t - 1 or a corrupt
// share do not, and malformed shares are typed errors.
#include "cohort/federated/shamir.h"

#include <gtest/gtest.h>

#include <random>

#include "cohort/core/error.h"

namespace cohort::federated::shamir {
namespace {

std::vector<uint8_t> random_secret(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> s(n);
  for (auto& b : s) b = static_cast<uint8_t>(rng());
  return s;
}

// Every subset of {0..n-1} of size k, as bit masks.
std::vector<uint32_t> subsets_of_size(int n, int k) {
  std::vector<uint32_t> out;
  for (uint32_t m = 0; m < (1u << n); ++m)
    if (__builtin_popcount(m) == k) out.push_back(m);
  return out;
}

std::vector<Share> pick(const std::vector<Share>& all, uint32_t mask) {
  std::vector<Share> out;
  for (size_t i = 0; i < all.size(); ++i)
    if (mask & (1u << i)) out.push_back(all[i]);
  return out;
}

TEST(Shamir, FieldArithmeticMatchesWideIntegers) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t a = rng() % kPrime, b = rng() % kPrime;
    const auto wide = static_cast<unsigned __int128>(a) * b % kPrime;
    EXPECT_EQ(mul(a, b), static_cast<uint64_t>(wide));
    EXPECT_EQ(add(a, b), (a + b) % kPrime);
    EXPECT_EQ(add(sub(a, b), b), a);
    if (a != 0) {
      EXPECT_EQ(mul(a, inverse(a)), 1u);
    }
  }
  EXPECT_EQ(mul(kPrime - 1, kPrime - 1), 1u);  // (-1)^2
}

TEST(Shamir, AnyTOfNSharesReconstruct) {
  const auto secret = random_secret(32, 2);
  const int n = 10, t = 6;
  const auto shares = split(secret, t, n);
  ASSERT_EQ(shares.size(), 10u);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(shares[i].x, static_cast<uint32_t>(i + 1));
    EXPECT_EQ(shares[i].y.size(), chunks_for(32));
  }
  for (int k : {t, t + 1, n})
    for (uint32_t mask : subsets_of_size(n, k)) {
      auto chosen = pick(shares, mask);
      ASSERT_EQ(combine(chosen, secret.size()), secret) << "subset mask " << mask;
    }
}

TEST(Shamir, FewerThanTSharesGiveADifferentValue) {
  const auto secret = random_secret(32, 3);
  const int n = 10, t = 6;
  const auto shares = split(secret, t, n);
  for (uint32_t mask : subsets_of_size(n, t - 1)) {
    auto chosen = pick(shares, mask);
    EXPECT_NE(combine(chosen, secret.size()), secret) << "subset mask " << mask;
  }
}

TEST(Shamir, ACorruptShareChangesTheResult) {
  const auto secret = random_secret(32, 4);
  auto shares = split(secret, 3, 5);
  std::vector<Share> chosen(shares.begin(), shares.begin() + 3);
  ASSERT_EQ(combine(chosen, 32), secret);
  for (size_t c = 0; c < chosen[1].y.size(); ++c) {
    auto bad = chosen;
    bad[1].y[c] = add(bad[1].y[c], 1);
    EXPECT_NE(combine(bad, 32), secret) << "chunk " << c;
  }
  auto wrong_x = chosen;
  wrong_x[0].x = 4;  // a share presented under another participant's x
  EXPECT_NE(combine(wrong_x, 32), secret);
}

TEST(Shamir, SecretsOfAnyLengthRoundTrip) {
  for (size_t len : {1u, 6u, 7u, 8u, 13u, 14u, 33u, 100u}) {
    const auto secret = random_secret(len, static_cast<uint32_t>(len));
    const auto shares = split(secret, 2, 3);
    std::vector<Share> two{shares[2], shares[0]};
    EXPECT_EQ(combine(two, len), secret) << len << " bytes";
  }
}

TEST(Shamir, MalformedSharesAreInvalidArgument) {
  const auto secret = random_secret(32, 5);
  auto shares = split(secret, 2, 3);
  EXPECT_THROW(split(secret, 4, 3), InvalidArgument);
  EXPECT_THROW(split(secret, 0, 3), InvalidArgument);
  EXPECT_THROW(combine(std::vector<Share>{}, 32), InvalidArgument);
  std::vector<Share> dup{shares[0], shares[0]};
  EXPECT_THROW(combine(dup, 32), InvalidArgument);
  std::vector<Share> zero{shares[0], shares[1]};
  zero[1].x = 0;
  EXPECT_THROW(combine(zero, 32), InvalidArgument);
  std::vector<Share> short_y{shares[0], shares[1]};
  short_y[1].y.pop_back();
  EXPECT_THROW(combine(short_y, 32), InvalidArgument);
  std::vector<Share> big{shares[0], shares[1]};
  big[0].y[0] = kPrime;
  EXPECT_THROW(combine(big, 32), InvalidArgument);
}

}  // namespace
}  // namespace cohort::federated::shamir
