#include "cohort/net/pki.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "cohort/core/error.h"

namespace cohort::net {
namespace {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

std::string path_in(const std::string& dir, const std::string& file) {
  return (std::filesystem::path(dir) / file).string();
}

Key new_key() {
  Key k(EVP_EC_gen("P-256"));
  COHORT_CHECK_IO(k != nullptr, "pki: cannot make an EC key");
  return k;
}

void add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  COHORT_CHECK_ARG(ext != nullptr, "pki: bad certificate extension '", value, "'");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A certificate for `key` named `cn`, signed by (issuer, issuer_key); self-signed when issuer
// is null.
Cert make_cert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key, int days,
               const std::vector<std::pair<int, std::string>>& exts) {
  Cert c(X509_new());
  X509_set_version(c.get(), 2);
  uint64_t serial = 0;
  RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof serial);
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(c.get()), serial >> 1);
  X509_gmtime_adj(X509_getm_notBefore(c.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c.get()), long(days) * 86400);
  X509_set_pubkey(c.get(), key);
  X509_NAME* name = X509_get_subject_name(c.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("cohort job"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer ? issuer : c.get();
  X509_set_issuer_name(c.get(), X509_get_subject_name(signer));
  for (const auto& [nid, value] : exts) add_ext(c.get(), signer, nid, value);
  COHORT_CHECK_IO(X509_sign(c.get(), issuer_key ? issuer_key : key, EVP_sha256()) > 0,
                  "pki: cannot sign the certificate of ", cn);
  return c;
}

// Writes through a temp file opened with `mode`, then renames: a reader sees all or nothing.
template <typename WriteFn>
void write_pem(const std::string& path, mode_t mode, WriteFn write) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  COHORT_CHECK_IO(fd >= 0, "pki: cannot write '", tmp, "': ", std::strerror(errno));
  FILE* f = ::fdopen(fd, "w");
  const bool ok = f && write(f) == 1;
  const bool closed = f ? std::fclose(f) == 0 : (::close(fd), false);
  COHORT_CHECK_IO(ok && closed, "pki: cannot write '", tmp, "'");
  std::filesystem::rename(tmp, path);
}

void save(const std::string& dir, const std::string& stem, EVP_PKEY* key, X509* cert) {
  write_pem(path_in(dir, stem + ".key"), 0600, [&](FILE* f) {
    return PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
  write_pem(path_in(dir, stem + ".pem"), 0644, [&](FILE* f) { return PEM_write_X509(f, cert); });
}

std::string san_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    unsigned char buf[16];
    const bool ip =
        inet_pton(AF_INET, n.c_str(), buf) == 1 || inet_pton(AF_INET6, n.c_str(), buf) == 1;
    out += (out.empty() ? "" : ",") + std::string(ip ? "IP:" : "DNS:") + n;
  }
  return out;
}

void sign_client(const std::string& dir, int i, X509* ca, EVP_PKEY* ca_key, int days) {
  Key k = new_key();
  const std::string cn = client_cert_name(i);
  Cert c = make_cert(k.get(), cn, ca, ca_key, days,
                     {{NID_basic_constraints, "critical,CA:FALSE"},
                      {NID_key_usage, "critical,digitalSignature"},
                      {NID_ext_key_usage, "clientAuth"}});
  save(dir, cn, k.get(), c.get());
}

template <typename T, typename ReadFn>
T read_pem(const std::string& path, ReadFn read) {
  FILE* f = std::fopen(path.c_str(), "r");
  COHORT_CHECK_IO(f != nullptr, "pki: cannot read '", path, "'");
  auto* v = read(f);
  std::fclose(f);
  COHORT_CHECK_ARG(v != nullptr, "pki: '", path, "' is not a PEM file of the expected kind");
  return T(v);
}

}  // namespace

std::string client_cert_name(int64_t i) {
  return "client-" + std::to_string(i);
}

void write_job_pki(const std::string& dir, const PkiOptions& o) {
  COHORT_CHECK_ARG(!o.server_names.empty(), "pki: the server needs at least one name");
  COHORT_CHECK_ARG(o.clients >= 0 && o.days >= 1, "pki: clients >= 0 and days >= 1");
  COHORT_CHECK_ARG(!std::filesystem::exists(path_in(dir, "ca.key")), "pki: '", dir,
                   "' already holds a job CA (ca.key); use another directory or remove it");
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace);
  Key ca_key = new_key();
  Cert ca = make_cert(ca_key.get(), "cohort job CA", nullptr, nullptr, o.days,
                      {{NID_basic_constraints, "critical,CA:TRUE"},
                       {NID_key_usage, "critical,keyCertSign,cRLSign"},
                       {NID_subject_key_identifier, "hash"}});
  save(dir, "ca", ca_key.get(), ca.get());
  Key server_key = new_key();
  Cert server = make_cert(server_key.get(), o.server_names.front(), ca.get(), ca_key.get(), o.days,
                          {{NID_basic_constraints, "critical,CA:FALSE"},
                           {NID_key_usage, "critical,digitalSignature"},
                           {NID_ext_key_usage, "serverAuth"},
                           {NID_subject_alt_name, san_list(o.server_names)}});
  save(dir, "server", server_key.get(), server.get());
  for (int i = 0; i < o.clients; ++i) sign_client(dir, i, ca.get(), ca_key.get(), o.days);
}

void add_client_certs(const std::string& dir, int first, int count, int days) {
  COHORT_CHECK_ARG(first >= 0 && count >= 0, "pki: bad client range");
  Cert ca = read_pem<Cert>(path_in(dir, "ca.pem"),
                           [](FILE* f) { return PEM_read_X509(f, nullptr, nullptr, nullptr); });
  Key ca_key = read_pem<Key>(path_in(dir, "ca.key"), [](FILE* f) {
    return PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
  });
  for (int i = first; i < first + count; ++i) sign_client(dir, i, ca.get(), ca_key.get(), days);
}

}  // namespace cohort::net
