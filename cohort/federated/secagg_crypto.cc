#include "cohort/federated/secagg_crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include <bit>
#include <cstring>
#include <memory>

#include "cohort/core/bytes.h"
#include "cohort/core/error.h"

namespace cohort::federated::secagg::crypto {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* p) const { EVP_CIPHER_CTX_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

#define SECAGG_SSL(call) COHORT_INTERNAL((call) == 1, "OpenSSL call failed: " #call)

Pkey private_key(const Key& secret) {
  Pkey k(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, secret.data(), secret.size()));
  COHORT_INTERNAL(k != nullptr, "X25519 private key did not load");
  return k;
}

CipherCtx new_cipher() {
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  COHORT_INTERNAL(ctx != nullptr, "EVP_CIPHER_CTX_new failed");
  return ctx;
}

}  // namespace

Key random_key() {
  Key k;
  SECAGG_SSL(RAND_bytes(k.data(), static_cast<int>(k.size())));
  return k;
}

KeyPair generate_keypair() {
  KeyPair kp;
  kp.secret = random_key();  // any 32 bytes are an X25519 private key (clamped on use)
  kp.public_key = public_of(kp.secret);
  return kp;
}

Key public_of(const Key& secret) {
  Pkey k = private_key(secret);
  Key pub;
  size_t len = pub.size();
  SECAGG_SSL(EVP_PKEY_get_raw_public_key(k.get(), pub.data(), &len));
  COHORT_INTERNAL(len == pub.size(), "X25519 public key of ", len, " bytes");
  return pub;
}

bool agree(const Key& secret, const Key& peer, Key& shared) {
  Pkey mine = private_key(secret);
  Pkey theirs(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer.data(), peer.size()));
  if (!theirs) return false;
  PkeyCtx ctx(EVP_PKEY_CTX_new(mine.get(), nullptr));
  COHORT_INTERNAL(ctx != nullptr, "EVP_PKEY_CTX_new failed");
  SECAGG_SSL(EVP_PKEY_derive_init(ctx.get()));
  if (EVP_PKEY_derive_set_peer(ctx.get(), theirs.get()) != 1) return false;
  size_t len = shared.size();
  return EVP_PKEY_derive(ctx.get(), shared.data(), &len) == 1 && len == shared.size();
}

Key hkdf(const Key& ikm, std::string_view label, uint64_t round) {
  std::vector<uint8_t> info(label.begin(), label.end());
  bytes::put(info, round);
  PkeyCtx ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr));
  COHORT_INTERNAL(ctx != nullptr, "HKDF context");
  SECAGG_SSL(EVP_PKEY_derive_init(ctx.get()));
  SECAGG_SSL(EVP_PKEY_CTX_set_hkdf_md(ctx.get(), EVP_sha256()));
  SECAGG_SSL(EVP_PKEY_CTX_set1_hkdf_key(ctx.get(), ikm.data(), static_cast<int>(ikm.size())));
  SECAGG_SSL(EVP_PKEY_CTX_add1_hkdf_info(ctx.get(), info.data(), static_cast<int>(info.size())));
  Key out;
  size_t len = out.size();
  SECAGG_SSL(EVP_PKEY_derive(ctx.get(), out.data(), &len));
  return out;
}

std::vector<uint8_t> seal(const Key& key, std::span<const uint8_t> aad,
                          std::span<const uint8_t> plaintext) {
  std::vector<uint8_t> out(kNonceBytes + plaintext.size() + kTagBytes);
  SECAGG_SSL(RAND_bytes(out.data(), kNonceBytes));
  CipherCtx ctx = new_cipher();
  SECAGG_SSL(EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), out.data()));
  int len = 0;
  SECAGG_SSL(EVP_EncryptUpdate(ctx.get(), nullptr, &len, aad.data(), static_cast<int>(aad.size())));
  SECAGG_SSL(EVP_EncryptUpdate(ctx.get(), out.data() + kNonceBytes, &len, plaintext.data(),
                               static_cast<int>(plaintext.size())));
  SECAGG_SSL(EVP_EncryptFinal_ex(ctx.get(), out.data() + kNonceBytes + len, &len));
  SECAGG_SSL(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes,
                                 out.data() + kNonceBytes + plaintext.size()));
  return out;
}

bool open(const Key& key, std::span<const uint8_t> aad, std::span<const uint8_t> sealed,
          std::vector<uint8_t>& plaintext) {
  if (sealed.size() < kNonceBytes + kTagBytes) return false;
  const size_t body = sealed.size() - kNonceBytes - kTagBytes;
  plaintext.assign(body, 0);
  CipherCtx ctx = new_cipher();
  SECAGG_SSL(EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), sealed.data()));
  int len = 0;
  SECAGG_SSL(EVP_DecryptUpdate(ctx.get(), nullptr, &len, aad.data(), static_cast<int>(aad.size())));
  SECAGG_SSL(EVP_DecryptUpdate(ctx.get(), plaintext.data(), &len, sealed.data() + kNonceBytes,
                               static_cast<int>(body)));
  std::array<uint8_t, kTagBytes> tag;
  std::memcpy(tag.data(), sealed.data() + kNonceBytes + body, kTagBytes);
  SECAGG_SSL(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()));
  if (EVP_DecryptFinal_ex(ctx.get(), plaintext.data() + len, &len) != 1) {
    wipe(plaintext);
    plaintext.clear();
    return false;
  }
  return true;
}

void add_prg(const Key& seed, Sign sign, std::span<uint64_t> out) {
  CipherCtx ctx = new_cipher();
  const std::array<uint8_t, 16> iv{};  // a zero counter: each seed is used for one vector only
  SECAGG_SSL(EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_ctr(), nullptr, seed.data(), iv.data()));
  constexpr size_t kBlock = 4096;  // elements per keystream block: 32 KiB, stays in L1/L2
  std::array<uint64_t, kBlock> zeros{}, stream;
  for (size_t begin = 0; begin < out.size(); begin += kBlock) {
    const size_t count = std::min(kBlock, out.size() - begin);
    int len = 0;
    SECAGG_SSL(EVP_EncryptUpdate(ctx.get(), reinterpret_cast<uint8_t*>(stream.data()), &len,
                                 reinterpret_cast<const uint8_t*>(zeros.data()),
                                 static_cast<int>(count * sizeof(uint64_t))));
    for (size_t i = 0; i < count; ++i) {
      uint64_t s = stream[i];
      if constexpr (std::endian::native == std::endian::big) s = __builtin_bswap64(s);
      out[begin + i] = sign == Sign::kAdd ? out[begin + i] + s : out[begin + i] - s;
    }
  }
  wipe({reinterpret_cast<uint8_t*>(stream.data()), sizeof(stream)});
}

void wipe(std::span<uint8_t> bytes) {
  OPENSSL_cleanse(bytes.data(), bytes.size());
}

}  // namespace cohort::federated::secagg::crypto
