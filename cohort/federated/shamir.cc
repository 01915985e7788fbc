#include "cohort/federated/shamir.h"

#include <openssl/rand.h>

#include <set>

#include "cohort/core/error.h"

namespace cohort::federated::shamir {
namespace {

// A uniform element of [0, p): 61 random bits, redrawing the single value p itself.
uint64_t random_element() {
  for (;;) {
    uint64_t v = 0;
    COHORT_CHECK_T(RAND_bytes(reinterpret_cast<unsigned char*>(&v), sizeof(v)) == 1,
                   ::cohort::Internal, "shamir: RAND_bytes failed");
    v &= kPrime;
    if (v != kPrime) return v;
  }
}

uint64_t reduce(unsigned __int128 v) {
  // 2^61 = 1 (mod p): fold the high bits onto the low ones, twice, then one subtraction.
  uint64_t r = static_cast<uint64_t>(v & kPrime) + static_cast<uint64_t>(v >> 61);
  r = (r & kPrime) + (r >> 61);
  return r >= kPrime ? r - kPrime : r;
}

uint64_t load_chunk(std::span<const uint8_t> secret, size_t c) {
  uint64_t v = 0;
  for (size_t k = 0; k < kChunkBytes && c * kChunkBytes + k < secret.size(); ++k)
    v |= uint64_t{secret[c * kChunkBytes + k]} << (8 * k);
  return v;
}

// Horner: the polynomial with coefficients coef (constant first) at x.
uint64_t evaluate(const std::vector<uint64_t>& coef, uint64_t x) {
  uint64_t acc = 0;
  for (size_t k = coef.size(); k-- > 0;) acc = add(mul(acc, x), coef[k]);
  return acc;
}

}  // namespace

uint64_t mul(uint64_t a, uint64_t b) {
  return reduce(static_cast<unsigned __int128>(a) * b);
}
uint64_t add(uint64_t a, uint64_t b) {
  uint64_t r = a + b;  // < 2^62: no overflow
  return r >= kPrime ? r - kPrime : r;
}
uint64_t sub(uint64_t a, uint64_t b) {
  return a >= b ? a - b : a + kPrime - b;
}

uint64_t inverse(uint64_t a) {
  COHORT_CHECK_ARG(a % kPrime != 0, "shamir: zero has no inverse");
  // Fermat: a^(p-2).
  uint64_t result = 1, base = a % kPrime;
  for (uint64_t e = kPrime - 2; e != 0; e >>= 1) {
    if (e & 1) result = mul(result, base);
    base = mul(base, base);
  }
  return result;
}

std::vector<Share> split(std::span<const uint8_t> secret, int threshold, int n) {
  COHORT_CHECK_ARG(threshold >= 1 && threshold <= n, "shamir: threshold ", threshold,
                   " must be in [1, n = ", n, "]");
  const size_t chunks = chunks_for(secret.size());
  std::vector<Share> shares(n);
  for (int i = 0; i < n; ++i) {
    shares[i].x = static_cast<uint32_t>(i + 1);
    shares[i].y.resize(chunks);
  }
  std::vector<uint64_t> coef(threshold);
  for (size_t c = 0; c < chunks; ++c) {
    coef[0] = load_chunk(secret, c);
    for (int k = 1; k < threshold; ++k) coef[k] = random_element();
    for (int i = 0; i < n; ++i) shares[i].y[c] = evaluate(coef, shares[i].x);
  }
  return shares;
}

std::vector<uint8_t> combine(std::span<const Share> shares, size_t secret_size) {
  COHORT_CHECK_ARG(!shares.empty(), "shamir: no shares to combine");
  const size_t chunks = chunks_for(secret_size);
  std::set<uint32_t> xs;
  for (const Share& s : shares) {
    COHORT_CHECK_ARG(s.x != 0 && xs.insert(s.x).second, "shamir: share x = ", s.x,
                     " is zero or repeated");
    COHORT_CHECK_ARG(s.y.size() == chunks, "shamir: share x = ", s.x, " has ", s.y.size(),
                     " elements, expected ", chunks, " for a ", secret_size, "-byte secret");
    for (uint64_t y : s.y) COHORT_CHECK_ARG(y < kPrime, "shamir: share x = ", s.x, " element >= p");
  }
  // Lagrange basis at 0: l_i = prod_{j != i} x_j / (x_j - x_i).
  std::vector<uint64_t> basis(shares.size());
  for (size_t i = 0; i < shares.size(); ++i) {
    uint64_t num = 1, den = 1;
    for (size_t j = 0; j < shares.size(); ++j) {
      if (j == i) continue;
      num = mul(num, shares[j].x);
      den = mul(den, sub(shares[j].x, shares[i].x));
    }
    basis[i] = mul(num, inverse(den));
  }
  std::vector<uint8_t> secret(secret_size);
  for (size_t c = 0; c < chunks; ++c) {
    uint64_t v = 0;
    for (size_t i = 0; i < shares.size(); ++i) v = add(v, mul(basis[i], shares[i].y[c]));
    // Only the low 56 bits carry bytes; a value above them means inconsistent shares, which
    // still must come out as some (wrong) secret rather than an error: see the header.
    for (size_t k = 0; k < kChunkBytes && c * kChunkBytes + k < secret_size; ++k)
      secret[c * kChunkBytes + k] = static_cast<uint8_t>(v >> (8 * k));
  }
  return secret;
}

}  // namespace cohort::federated::shamir
