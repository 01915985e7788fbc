#pragma once
// Mutual HMAC-SHA256 challenge-response: before anything else is read on a connection (store or
// data plane), the connecting side proves it knows the per-job secret, and the accepting side
// proves it back, so neither an uninvited client nor an impostor server gets in.
//
//   accepting side (server)                      connecting side (client)
//   1. challenge: magic "cAU1", type 1,
//      version 1, server_nonce[32]  ------------>
//                                    <---------  2. response: magic, type 2, version 1,
//                                                   client_nonce[32], client_mac[32]
//   3. verify client_mac (CRYPTO_memcmp);
//      result: magic, type 3, status (0 ok,
//      1 refused), server_mac[32] --------------> 4. verify server_mac
//
//   client_mac = HMAC-SHA256(secret, "cohort-auth client" 0 context 0 server_nonce client_nonce)
//   server_mac = HMAC-SHA256(secret, "cohort-auth server" 0 context 0 server_nonce client_nonce)
//
// Nonces come from RAND_bytes, so a recorded handshake cannot be replayed; `context` names the
// protocol ("cohort-store-v1", "cohort-tcp-v1"), so a proof made for one cannot open another.
// The secret never crosses the wire. This authenticates; it does not encrypt the traffic after.
//
// Two ways to use it: the blocking fd helpers (serve_challenge / answer_challenge), for code that
// owns a connected socket; or the two handshake objects, for event loops that feed bytes as they
// arrive (TcpStoreServer).
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "cohort/core/error.h"
#include "cohort/net/secret.h"
#include "cohort/net/socket.h"

namespace cohort::net {

// The peer was reached and refused us, or proved it is not who it should be: a wrong job secret
// or (TLS) a certificate it does not accept. Unlike a peer that is not up yet or hung up,
// retrying cannot help.
class AuthRefused : public ErrorKind<AuthRefused, IoError> {
 public:
  using ErrorKind::ErrorKind;
};

}  // namespace cohort::net

namespace cohort::net::auth {

inline constexpr std::string_view kStoreContext = "cohort-store-v1";
inline constexpr uint32_t kMagic = 0x31554163;  // "cAU1" in little-endian byte order
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kChallengeBytes = 4 + 1 + 1 + kNonceBytes;
inline constexpr size_t kResponseBytes = 4 + 1 + 1 + kNonceBytes + kMacBytes;
inline constexpr size_t kResultBytes = 4 + 1 + 1 + kMacBytes;

using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

Mac client_mac(const Secret& secret, std::string_view context, const Nonce& server_nonce,
               const Nonce& client_nonce);
Mac server_mac(const Secret& secret, std::string_view context, const Nonce& server_nonce,
               const Nonce& client_nonce);

class ServerHandshake {
 public:
  enum class Verdict { kAccepted, kWrongSecret, kMalformed };
  // Draws the server nonce.
  ServerHandshake(const Secret& secret, std::string_view context);
  const std::array<uint8_t, kChallengeBytes>& challenge() const { return challenge_; }
  // False as soon as the bytes received so far cannot start a response (wrong magic, type or
  // version), so a peer sending garbage is dropped without waiting for all kResponseBytes.
  static bool plausible_prefix(std::span<const uint8_t> partial);
  Verdict verify(std::span<const uint8_t> response);
  // The message to send back after verify(): accepted (with the server's proof) or refused.
  std::array<uint8_t, kResultBytes> result() const;

 private:
  Secret secret_;
  std::string context_;
  Nonce server_nonce_{};
  Nonce client_nonce_{};
  bool accepted_ = false;
  std::array<uint8_t, kChallengeBytes> challenge_{};
};

class ClientHandshake {
 public:
  ClientHandshake(const Secret& secret, std::string_view context);
  // IoError naming `peer` if the challenge is not a cohort handshake.
  std::array<uint8_t, kResponseBytes> respond(std::span<const uint8_t> challenge,
                                              std::string_view peer);
  // AuthRefused "authentication failed: wrong job secret for <peer>" on refusal, or when the
  // server's proof is wrong (it does not know the secret either).
  void check_result(std::span<const uint8_t> result, std::string_view peer) const;

 private:
  Secret secret_;
  std::string context_;
  Nonce server_nonce_{};
  Nonce client_nonce_{};
};

// Blocking helpers on a connected socket (blocking or not). `peer` names the other side in
// errors and logs ("store at 127.0.0.1:29500", "rank 3 at 10.0.0.2:41234").
//
// Accepting side: challenge, verify, answer. A wrong secret is logged (warn), refused to the
// peer, and thrown as IoError; garbage is thrown as IoError; Timeout at the deadline.
void serve_challenge(int fd, const Secret& secret, std::string_view context, Deadline deadline,
                     std::string_view peer);
// Connecting side. IoError "authentication failed: wrong job secret for <peer>" when refused.
void answer_challenge(int fd, const Secret& secret, std::string_view context, Deadline deadline,
                      std::string_view peer);

}  // namespace cohort::net::auth
