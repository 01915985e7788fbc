#include "cohort/net/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "cohort/core/error.h"
#include "cohort/net/auth.h"
#include "cohort/net/socket.h"

namespace cohort::net {
namespace {

// OpenSSL's queued errors as one line (and clears the queue).
std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    const char* reason = ERR_reason_error_string(e);
    out += reason ? reason : buf;
  }
  return out.empty() ? "unknown TLS error" : out;
}

// A socket BIO that sends with MSG_NOSIGNAL: OpenSSL's own socket BIO write()s, and a write to
// a peer that has gone would raise SIGPIPE, which kills the process (a server pushing to a
// killed client). The fd is the BIO's data; the caller owns the fd.
int bio_fd(BIO* b) {
  return int(reinterpret_cast<intptr_t>(BIO_get_data(b)));
}

int bio_write(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  ssize_t r;
  do {
    r = ::send(bio_fd(b), data, size_t(len), MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(b);
  return int(r);
}

int bio_read(BIO* b, char* data, int len) {
  BIO_clear_retry_flags(b);
  ssize_t r;
  do {
    r = ::recv(bio_fd(b), data, size_t(len), MSG_DONTWAIT);
  } while (r < 0 && errno == EINTR);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
  return int(r);
}

long bio_ctrl(BIO*, int cmd, long, void*) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;  // nothing is buffered here
}

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

// Built once, never changed after: a table of functions, not state.
const BIO_METHOD* socket_method() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "cohort socket");
    COHORT_CHECK_IO(m != nullptr, "TLS: BIO_meth_new failed: ", openssl_errors());
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    return m;
  }();
  return method;
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

TlsContext::TlsContext(const TlsOptions& o, TlsRole role) : role_(role) {
  ctx_ = SSL_CTX_new(role == TlsRole::kServer ? TLS_server_method() : TLS_client_method());
  COHORT_CHECK_IO(ctx_ != nullptr, "TLS: cannot make a context: ", openssl_errors());
  SSL_CTX_set_min_proto_version(ctx_, TLS1_3_VERSION);
  COHORT_CHECK_ARG(SSL_CTX_use_certificate_chain_file(ctx_, o.cert_file.c_str()) == 1,
                   "TLS: cannot load the certificate '", o.cert_file, "': ", openssl_errors());
  COHORT_CHECK_ARG(SSL_CTX_use_PrivateKey_file(ctx_, o.key_file.c_str(), SSL_FILETYPE_PEM) == 1,
                   "TLS: cannot load the private key '", o.key_file, "': ", openssl_errors());
  COHORT_CHECK_ARG(SSL_CTX_check_private_key(ctx_) == 1, "TLS: the key '", o.key_file,
                   "' does not belong to the certificate '", o.cert_file, "'");
  COHORT_CHECK_ARG(SSL_CTX_load_verify_locations(ctx_, o.ca_file.c_str(), nullptr) == 1,
                   "TLS: cannot load the CA certificate '", o.ca_file, "': ", openssl_errors());
  SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_mode(ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // A peer that closes its socket without a close_notify has hung up, as on plain TCP (a
  // killed client); the records themselves stay authenticated.
  SSL_CTX_set_options(ctx_, SSL_OP_IGNORE_UNEXPECTED_EOF);
  if (role == TlsRole::kServer) SSL_CTX_set_num_tickets(ctx_, 0);  // no session resumption
}

TlsContext::~TlsContext() {
  SSL_CTX_free(ctx_);
}

TlsStream::TlsStream(const TlsContext& ctx, int fd, const std::string& verify_host) : fd_(fd) {
  ssl_ = SSL_new(ctx.get());
  COHORT_CHECK_IO(ssl_ != nullptr, "TLS: cannot start a session: ", openssl_errors());
  BIO* bio = BIO_new(socket_method());
  if (!bio) {
    SSL_free(ssl_);
    throw IoError("TLS: BIO_new failed: " + openssl_errors());
  }
  BIO_set_data(bio, reinterpret_cast<void*>(intptr_t(fd)));
  BIO_up_ref(bio);  // one reference for reading, one for writing
  SSL_set0_rbio(ssl_, bio);
  SSL_set0_wbio(ssl_, bio);
  if (ctx.role() == TlsRole::kServer) {
    SSL_set_accept_state(ssl_);
    return;
  }
  SSL_set_connect_state(ssl_);
  if (verify_host.empty()) return;
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
  if (is_ip_address(verify_host)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, verify_host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl_, verify_host.c_str());
    X509_VERIFY_PARAM_set1_host(param, verify_host.c_str(), 0);
  }
}

TlsStream::~TlsStream() {
  SSL_free(ssl_);
}

ssize_t TlsStream::finish(int rc) {
  want_read_ = want_write_ = false;
  if (rc > 0) return rc;
  const int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    (err == SSL_ERROR_WANT_READ ? want_read_ : want_write_) = true;
    errno = EAGAIN;
    return -1;
  }
  if (err == SSL_ERROR_ZERO_RETURN) return 0;
  if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
    if (errno == 0 || errno == ECONNRESET || errno == EPIPE) return 0;  // the peer went away
    error_ = std::strerror(errno);
    return -1;
  }
  error_ = openssl_errors();
  const long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK)
    error_ += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
  errno = EPROTO;
  return -1;
}

ssize_t TlsStream::read(void* buf, size_t n) {
  ERR_clear_error();
  return finish(SSL_read(ssl_, buf, int(std::min<size_t>(n, size_t(1) << 30))));
}

ssize_t TlsStream::write(const void* buf, size_t n) {
  ERR_clear_error();
  const ssize_t r = finish(SSL_write(ssl_, buf, int(std::min<size_t>(n, size_t(1) << 30))));
  if (r != 0) return r;
  // The peer closed (a close_notify, or an EOF, often in the middle of the TLS handshake of a
  // peer that connected and hung up): an error, as send() to a closed peer is.
  error_ = "the peer closed the connection";
  errno = EPIPE;
  return -1;
}

size_t TlsStream::pending() const {
  return size_t(SSL_pending(ssl_));
}

bool TlsStream::established() const {
  return SSL_is_init_finished(ssl_);
}

std::string TlsStream::peer_name() const {
  if (!established() || SSL_get_verify_result(ssl_) != X509_V_OK) return {};
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (!cert) return {};
  char cn[256] = {};
  const int len = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn,
                                            int(sizeof cn));
  return len > 0 ? std::string(cn, size_t(len)) : std::string();
}

void TlsStream::wait(std::chrono::steady_clock::time_point deadline, std::string_view what) const {
  pollfd p{fd_, short(want_write_ ? POLLOUT : POLLIN), 0};
  const int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
  COHORT_CHECK_IO(rc >= 0 || errno == EINTR, "TLS with ", what,
                  ": poll failed: ", std::strerror(errno));
  COHORT_CHECK_T(rc != 0 || std::chrono::steady_clock::now() < deadline, Timeout,
                 "timed out in the TLS handshake with ", what);
}

void TlsStream::handshake(std::chrono::steady_clock::time_point deadline, std::string_view what) {
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_do_handshake(ssl_);
    if (rc == 1) return;
    if (finish(rc) == 0 && !want_read_ && !want_write_)
      throw IoError(detail::str("TLS handshake with ", what,
                                " failed: the peer closed the connection (a server stopping, "
                                "or not a TLS server)"));
    COHORT_CHECK_T(errno == EAGAIN, AuthRefused, "TLS handshake with ", what, " failed: ", error_);
    wait(deadline, what);
  }
}

void TlsStream::read_exact(void* buf, size_t n, std::chrono::steady_clock::time_point deadline,
                           std::string_view what) {
  auto* p = static_cast<uint8_t*>(buf);
  for (size_t got = 0; got < n;) {
    const ssize_t r = read(p + got, n - got);
    if (r > 0) {
      got += size_t(r);
      continue;
    }
    check_progress(r, what);
    wait(deadline, what);
  }
}

void TlsStream::check_progress(ssize_t r, std::string_view what) const {
  if (r < 0 && errno == EAGAIN) return;
  // An alert from the peer (it refused our certificate) or a certificate that does not verify.
  COHORT_CHECK_T(!(r < 0 && errno == EPROTO), AuthRefused, "TLS with ", what, " failed: ", error_);
  throw IoError(detail::str("TLS with ", what, ": ",
                            r == 0 ? std::string("the peer closed the connection") : error_));
}

void TlsStream::write_all(const void* buf, size_t n, std::chrono::steady_clock::time_point deadline,
                          std::string_view what) {
  const auto* p = static_cast<const uint8_t*>(buf);
  for (size_t sent = 0; sent < n;) {
    const ssize_t r = write(p + sent, n - sent);
    if (r > 0) {
      sent += size_t(r);
      continue;
    }
    check_progress(r, what);
    wait(deadline, what);
  }
}

}  // namespace cohort::net
