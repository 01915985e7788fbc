#pragma once
// Shamir secret sharing over GF(p), p = 2^61 - 1 (a Mersenne prime: reduction is a shift and an
// add, and a product of two elements fits in 128 bits).
//
// A secret of any byte length is cut into 7-byte chunks (56 bits < p, so every chunk is a field
// element); each chunk gets its own random polynomial of degree threshold-1 with the chunk as
// constant term, and share i holds the polynomial values at x = i + 1 (x = 0 would be the
// secret). Any `threshold` shares give the secret back by Lagrange interpolation at 0; fewer give
// a value that is uniformly random and independent of the secret, chunk by chunk.
//
// combine() interpolates through every share it is given. It cannot tell a corrupt or foreign
// share from a good one (that needs commitments, which secure aggregation in the semi-honest
// model does without): a wrong share just gives a wrong secret. Callers that can check the
// result (a private key against its public key) should.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cohort::federated::shamir {

inline constexpr uint64_t kPrime = (uint64_t{1} << 61) - 1;
inline constexpr size_t kChunkBytes = 7;

// One participant's share: the x-coordinate (participant index + 1) and one field element per
// 7-byte chunk of the secret.
struct Share {
  uint32_t x = 0;
  std::vector<uint64_t> y;
};

// Field elements per share for a secret of `secret_size` bytes.
constexpr size_t chunks_for(size_t secret_size) {
  return (secret_size + kChunkBytes - 1) / kChunkBytes;
}

// Splits `secret` into n shares with x = 1..n, any `threshold` of which reconstruct it.
// Randomness from OpenSSL's RAND_bytes. InvalidArgument unless 1 <= threshold <= n.
std::vector<Share> split(std::span<const uint8_t> secret, int threshold, int n);

// The secret (of `secret_size` bytes) through all of `shares`. InvalidArgument on no shares,
// a duplicate or zero x, an element >= p, or a share with the wrong number of elements.
std::vector<uint8_t> combine(std::span<const Share> shares, size_t secret_size);

// Field arithmetic, exposed for tests.
uint64_t mul(uint64_t a, uint64_t b);
uint64_t add(uint64_t a, uint64_t b);
uint64_t sub(uint64_t a, uint64_t b);
uint64_t inverse(uint64_t a);  // a != 0

}  // namespace cohort::federated::shamir
