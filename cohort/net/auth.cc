#include "cohort/net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
#include <vector>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"

namespace cohort::net::auth {
namespace {

constexpr uint8_t kVersion = 1;
enum MessageType : uint8_t { kChallenge = 1, kResponse = 2, kResult = 3 };
enum ResultStatus : uint8_t { kAccepted = 0, kRefused = 1 };

void put_header(uint8_t* p, MessageType type, uint8_t byte) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(kMagic >> (8 * i));
  p[4] = type;
  p[5] = byte;
}

bool magic_ok(std::span<const uint8_t> m) {
  for (size_t i = 0; i < 4 && i < m.size(); ++i)
    if (m[i] != uint8_t(kMagic >> (8 * i))) return false;
  return true;
}

Mac hmac(const Secret& secret, std::string_view label, std::string_view context,
         const Nonce& server_nonce, const Nonce& client_nonce) {
  std::vector<uint8_t> msg;
  msg.reserve(label.size() + context.size() + 2 + 2 * kNonceBytes);
  msg.insert(msg.end(), label.begin(), label.end());
  msg.push_back(0);
  msg.insert(msg.end(), context.begin(), context.end());
  msg.push_back(0);
  msg.insert(msg.end(), server_nonce.begin(), server_nonce.end());
  msg.insert(msg.end(), client_nonce.begin(), client_nonce.end());
  static const uint8_t kNoKey = 0;  // OpenSSL wants a non-null key even when it is empty
  auto key = secret.bytes();
  Mac out{};
  unsigned int len = 0;
  COHORT_INTERNAL(HMAC(EVP_sha256(), key.empty() ? &kNoKey : key.data(), int(key.size()),
                       msg.data(), msg.size(), out.data(), &len) != nullptr &&
                      len == kMacBytes,
                  "HMAC-SHA256 failed");
  return out;
}

bool equal(const uint8_t* a, const uint8_t* b, size_t n) {
  return CRYPTO_memcmp(a, b, n) == 0;
}

}  // namespace

Mac client_mac(const Secret& secret, std::string_view context, const Nonce& server_nonce,
               const Nonce& client_nonce) {
  return hmac(secret, "cohort-auth client", context, server_nonce, client_nonce);
}

Mac server_mac(const Secret& secret, std::string_view context, const Nonce& server_nonce,
               const Nonce& client_nonce) {
  return hmac(secret, "cohort-auth server", context, server_nonce, client_nonce);
}

ServerHandshake::ServerHandshake(const Secret& secret, std::string_view context)
    : secret_(secret), context_(context) {
  random_bytes(server_nonce_);
  put_header(challenge_.data(), kChallenge, kVersion);
  std::memcpy(challenge_.data() + 6, server_nonce_.data(), kNonceBytes);
}

bool ServerHandshake::plausible_prefix(std::span<const uint8_t> partial) {
  if (!magic_ok(partial)) return false;
  if (partial.size() > 4 && partial[4] != kResponse) return false;
  if (partial.size() > 5 && partial[5] != kVersion) return false;
  return true;
}

ServerHandshake::Verdict ServerHandshake::verify(std::span<const uint8_t> response) {
  accepted_ = false;
  if (response.size() != kResponseBytes || !plausible_prefix(response)) return Verdict::kMalformed;
  std::memcpy(client_nonce_.data(), response.data() + 6, kNonceBytes);
  Mac expected = client_mac(secret_, context_, server_nonce_, client_nonce_);
  accepted_ = equal(expected.data(), response.data() + 6 + kNonceBytes, kMacBytes);
  return accepted_ ? Verdict::kAccepted : Verdict::kWrongSecret;
}

std::array<uint8_t, kResultBytes> ServerHandshake::result() const {
  std::array<uint8_t, kResultBytes> out{};
  put_header(out.data(), kResult, accepted_ ? kAccepted : kRefused);
  if (accepted_) {
    Mac proof = server_mac(secret_, context_, server_nonce_, client_nonce_);
    std::memcpy(out.data() + 6, proof.data(), kMacBytes);
  }
  return out;
}

ClientHandshake::ClientHandshake(const Secret& secret, std::string_view context)
    : secret_(secret), context_(context) {
  random_bytes(client_nonce_);
}

std::array<uint8_t, kResponseBytes> ClientHandshake::respond(std::span<const uint8_t> challenge,
                                                             std::string_view peer) {
  COHORT_CHECK_IO(
      challenge.size() == kChallengeBytes && magic_ok(challenge) && challenge[4] == kChallenge,
      "authentication with ", peer,
      " failed: its greeting is not a cohort handshake (wrong port, or not a "
      "cohort service?)");
  COHORT_CHECK_IO(challenge[5] == kVersion, "authentication with ", peer,
                  " failed: it speaks handshake version ", int(challenge[5]), ", we speak ",
                  int(kVersion), " (mixed cohort versions in one job?)");
  std::memcpy(server_nonce_.data(), challenge.data() + 6, kNonceBytes);
  std::array<uint8_t, kResponseBytes> out{};
  put_header(out.data(), kResponse, kVersion);
  std::memcpy(out.data() + 6, client_nonce_.data(), kNonceBytes);
  Mac mac = client_mac(secret_, context_, server_nonce_, client_nonce_);
  std::memcpy(out.data() + 6 + kNonceBytes, mac.data(), kMacBytes);
  return out;
}

void ClientHandshake::check_result(std::span<const uint8_t> result, std::string_view peer) const {
  COHORT_CHECK_IO(result.size() == kResultBytes && magic_ok(result) && result[4] == kResult,
                  "authentication with ", peer, " failed: malformed handshake result");
  COHORT_CHECK_T(result[5] != kRefused, AuthRefused, "authentication failed: wrong job secret for ",
                 peer);
  Mac expected = server_mac(secret_, context_, server_nonce_, client_nonce_);
  COHORT_CHECK_T(result[5] == kAccepted && equal(expected.data(), result.data() + 6, kMacBytes),
                 AuthRefused, "authentication failed: ", peer,
                 " could not prove it knows the job secret (an impostor, or a server of another "
                 "job on this address?)");
}

void serve_challenge(int fd, const Secret& secret, std::string_view context, Deadline deadline,
                     std::string_view peer) {
  ServerHandshake hs(secret, context);
  write_all(fd, hs.challenge().data(), kChallengeBytes, deadline, peer, "auth challenge");
  std::array<uint8_t, kResponseBytes> response{};
  // The first 6 bytes decide whether this is a handshake at all: drop garbage without waiting.
  read_exact(fd, response.data(), 6, deadline, peer, "auth response");
  COHORT_CHECK_IO(ServerHandshake::plausible_prefix({response.data(), 6}), "authentication: ", peer,
                  " sent bytes that are not a cohort handshake; connection dropped");
  read_exact(fd, response.data() + 6, kResponseBytes - 6, deadline, peer, "auth response");
  auto verdict = hs.verify(response);
  auto result = hs.result();
  if (verdict == ServerHandshake::Verdict::kWrongSecret) {
    log::warn("auth", "refused ", peer, ": wrong job secret (", context, ")");
    // Best effort: the peer learns why; it may already be gone.
    try {
      write_all(fd, result.data(), kResultBytes, deadline, peer, "auth result");
    } catch (const Error&) {
    }
    throw IoError(detail::str("authentication failed: ", peer, " does not know the job secret"));
  }
  write_all(fd, result.data(), kResultBytes, deadline, peer, "auth result");
}

void answer_challenge(int fd, const Secret& secret, std::string_view context, Deadline deadline,
                      std::string_view peer) {
  ClientHandshake hs(secret, context);
  std::array<uint8_t, kChallengeBytes> challenge{};
  read_exact(fd, challenge.data(), kChallengeBytes, deadline, peer, "auth challenge");
  auto response = hs.respond(challenge, peer);
  write_all(fd, response.data(), kResponseBytes, deadline, peer, "auth response");
  std::array<uint8_t, kResultBytes> result{};
  read_exact(fd, result.data(), kResultBytes, deadline, peer, "auth result");
  hs.check_result(result, peer);
}

}  // namespace cohort::net::auth
