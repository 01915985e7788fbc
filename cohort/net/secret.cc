#include "cohort/net/secret.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cohort/core/error.h"

namespace cohort::net {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

Secret::~Secret() {
  if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

Secret Secret::from_hex(std::string_view text, std::string_view origin) {
  std::string_view hex = trim(text);
  COHORT_CHECK_ARG(hex.size() % 2 == 0, "job secret from ", origin, ": ", hex.size(),
                   " hex digits, expected an even number");
  Secret s;
  s.bytes_.resize(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
    COHORT_CHECK_ARG(hi >= 0 && lo >= 0, "job secret from ", origin, ": character ", i + 1,
                     " is not a hex digit (expected hex, e.g. from `openssl rand -hex 32`)");
    s.bytes_[i / 2] = uint8_t(hi * 16 + lo);
  }
  COHORT_CHECK_ARG(s.bytes_.size() >= kMinSecretBytes, "job secret from ", origin, ": ",
                   s.bytes_.size(), " bytes, need at least ", kMinSecretBytes, " (",
                   2 * kMinSecretBytes, " hex digits)");
  return s;
}

Secret Secret::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  COHORT_CHECK_IO(in.good(), "job secret file '", path, "': cannot open: ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  COHORT_CHECK_IO(!in.bad(), "job secret file '", path, "': read failed");
  std::string content = text.str();
  Secret s = from_hex(content, "file '" + path + "'");
  OPENSSL_cleanse(content.data(), content.size());
  return s;
}

Secret Secret::generate() {
  Secret s;
  s.bytes_.resize(32);
  random_bytes(s.bytes_);
  return s;
}

Secret Secret::derive(std::string_view purpose) const {
  COHORT_CHECK_ARG(!empty(), "cannot derive a key for '", purpose, "' from an empty secret");
  std::string msg = "cohort derive";
  msg.push_back('\0');
  msg.append(purpose);
  Secret d;
  d.bytes_.resize(32);
  unsigned int len = 0;
  COHORT_INTERNAL(HMAC(EVP_sha256(), bytes_.data(), int(bytes_.size()),
                       reinterpret_cast<const uint8_t*>(msg.data()), msg.size(), d.bytes_.data(),
                       &len) != nullptr &&
                      len == d.bytes_.size(),
                  "HMAC-SHA256 failed");
  return d;
}

std::string Secret::to_hex() const {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes_.size() * 2);
  for (uint8_t b : bytes_) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

bool Secret::operator==(const Secret& other) const {
  return bytes_.size() == other.bytes_.size() &&
         (bytes_.empty() || CRYPTO_memcmp(bytes_.data(), other.bytes_.data(), bytes_.size()) == 0);
}

void check_secret(const Secret& secret, SecretPolicy policy, std::string_view who) {
  COHORT_CHECK_ARG(!secret.empty() || policy == SecretPolicy::kAllowInsecure, who,
                   ": no job secret. Set COHORT_JOB_SECRET (hex, e.g. `openssl rand -hex 32`) or "
                   "COHORT_JOB_SECRET_FILE; `cohort run` sets one for you. Only single-host tests "
                   "may opt out (SecretPolicy::kAllowInsecure / COHORT_ALLOW_INSECURE=1)");
}

bool is_loopback_host(std::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.starts_with("127.");
}

void random_bytes(std::span<uint8_t> out) {
  if (out.empty()) return;
  COHORT_INTERNAL(RAND_bytes(out.data(), int(out.size())) == 1,
                  "OpenSSL RAND_bytes failed to produce ", out.size(), " random bytes");
}

}  // namespace cohort::net
