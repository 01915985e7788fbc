#pragma once
// The cryptographic primitives of secure aggregation (secagg.h), as small functions over byte
// arrays on top of OpenSSL: X25519 key agreement, HKDF-SHA256, AES-256-GCM for the shares in
// transit and AES-256-CTR as the PRG that expands a 32-byte seed into a mask vector.
// Internal to federated/: secagg.cc and its tests use it; nothing here knows about users.
#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace cohort::federated::secagg::crypto {

inline constexpr size_t kKeyBytes = 32;    // X25519 keys, AES-256 keys, PRG seeds
inline constexpr size_t kNonceBytes = 12;  // AES-GCM nonce
inline constexpr size_t kTagBytes = 16;    // AES-GCM tag

using Key = std::array<uint8_t, kKeyBytes>;

struct KeyPair {
  Key secret{};
  Key public_key{};
};

// A fresh X25519 key pair.
KeyPair generate_keypair();
// The public key of an X25519 private key (to check a reconstructed one against its advert).
Key public_of(const Key& secret);
// X25519(secret, peer). Returns false when the peer key is unusable (a small-order point gives
// an all-zero shared secret, which OpenSSL refuses): the caller names the peer in its error.
bool agree(const Key& secret, const Key& peer, Key& shared);
// HKDF-SHA256 of `ikm` with no salt and info = label || round (little-endian), 32 bytes out.
Key hkdf(const Key& ikm, std::string_view label, uint64_t round);

// 32 bytes from RAND_bytes.
Key random_key();

// AES-256-GCM: returns nonce || ciphertext || tag, with a random nonce.
std::vector<uint8_t> seal(const Key& key, std::span<const uint8_t> aad,
                          std::span<const uint8_t> plaintext);
// Opens what seal() made; false when the tag does not verify (wrong key, AAD or bytes).
bool open(const Key& key, std::span<const uint8_t> aad, std::span<const uint8_t> sealed,
          std::vector<uint8_t>& plaintext);

enum class Sign { kAdd, kSubtract };
// out[i] += or -= PRG(seed)[i] in Z_2^64, where PRG(seed) is the AES-256-CTR keystream under
// `seed` from a zero counter, read as little-endian uint64s. Works in blocks so a long vector
// never needs a second vector-sized buffer.
void add_prg(const Key& seed, Sign sign, std::span<uint64_t> out);

// Zeroes secret bytes in a way the compiler does not elide.
void wipe(std::span<uint8_t> bytes);

}  // namespace cohort::federated::secagg::crypto
