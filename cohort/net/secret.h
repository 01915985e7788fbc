#pragma once
// Secret: the per-job key every store and data connection proves it knows (see auth.h).
// The launcher generates one per job and hands it to ranks as COHORT_JOB_SECRET (hex) or as a
// file (COHORT_JOB_SECRET_FILE); bootstrap.h reads it. An empty Secret means "insecure": it is
// accepted only where a caller opted in explicitly (single-host tests on loopback).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::net {

// 128 bits: below that, an attacker on the network could guess it offline from a captured
// handshake.
inline constexpr size_t kMinSecretBytes = 16;

class Secret {
 public:
  Secret() = default;  // empty: insecure
  ~Secret();           // wipes the bytes
  Secret(const Secret&) = default;
  Secret& operator=(const Secret&) = default;
  Secret(Secret&&) = default;
  Secret& operator=(Secret&&) = default;

  // Parses hex (surrounding whitespace ignored). InvalidArgument naming `origin` (the variable
  // or file it came from) on odd length, a non-hex digit or fewer than kMinSecretBytes bytes.
  static Secret from_hex(std::string_view hex, std::string_view origin);
  // Reads a file holding the hex secret. IoError if unreadable; InvalidArgument as from_hex.
  static Secret from_file(const std::string& path);
  // 32 fresh random bytes (OpenSSL RAND_bytes).
  static Secret generate();

  // A key for one purpose, HMAC-SHA256(secret, "cohort derive" 0 purpose): showing it (the
  // dashboard's token in a printed URL) reveals nothing of the secret or of other purposes'
  // keys. InvalidArgument for an empty secret.
  Secret derive(std::string_view purpose) const;

  std::string to_hex() const;
  bool empty() const { return bytes_.empty(); }
  std::span<const uint8_t> bytes() const { return bytes_; }
  bool operator==(const Secret& other) const;

 private:
  std::vector<uint8_t> bytes_;
};

// Whether an empty secret is acceptable. kAllowInsecure is an explicit opt-in for single-host
// tests; even then a server refuses to bind a non-loopback address without a secret.
enum class SecretPolicy { kRequired, kAllowInsecure };
// InvalidArgument naming `who` if the secret is empty and the policy requires one.
void check_secret(const Secret& secret, SecretPolicy policy, std::string_view who);
// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(std::string_view host);

// Fills out with cryptographically random bytes. Internal error if OpenSSL cannot.
void random_bytes(std::span<uint8_t> out);

}  // namespace cohort::net
