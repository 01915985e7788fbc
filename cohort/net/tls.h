#pragma once
// TLS for cohort's long-lived services (the service channel: federated and parameter servers),
// with OpenSSL 3: mutual authentication against one job CA (`cohort fl keys` makes it, pki.h),
// TLS 1.3 only. Both sides present a certificate signed by the job CA and verify the other's;
// a client also checks the server certificate's name (DNS or IP SAN) against the host it
// dialled. The job secret's HMAC handshake (auth.h) then runs inside the TLS channel, so a
// peer needs both a job certificate and the secret.
//
// TlsStream wraps one connected, non-blocking socket. Its read/write behave like recv/send
// with MSG_DONTWAIT (-1 and errno EAGAIN when the socket is not ready), so an event loop keeps
// its shape; the TLS handshake happens inside the first reads and writes. Two things differ
// from a plain socket, and callers handle both: a read may need the socket writable (or a
// write readable) while the handshake runs (wants_write / wants_read), and decrypted bytes
// may wait inside the TLS layer with nothing left on the socket (pending()).
// Threads: one TlsStream at a time; a caller that reads and writes from two threads holds a
// mutex around every call (the service client does).
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace cohort::net {

struct TlsOptions {
  std::string ca_file;    // the job CA's certificate (PEM)
  std::string cert_file;  // this side's certificate (PEM), signed by the CA
  std::string key_file;   // its private key (PEM)
  bool enabled() const { return !ca_file.empty(); }
};

enum class TlsRole { kServer, kClient };

// An SSL_CTX with the job's CA, this side's certificate and key, TLS 1.3 and peer
// verification. InvalidArgument naming the file that cannot be loaded or that does not match.
class TlsContext {
 public:
  TlsContext(const TlsOptions& options, TlsRole role);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  SSL_CTX* get() const { return ctx_; }
  TlsRole role() const { return role_; }

 private:
  SSL_CTX* ctx_ = nullptr;
  TlsRole role_;
};

class TlsStream {
 public:
  // fd stays owned by the caller and must outlive the stream. verify_host: for a client, the
  // name or address the server's certificate must carry.
  TlsStream(const TlsContext& ctx, int fd, const std::string& verify_host = "");
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // > 0: bytes moved; 0 (read only): the peer closed; -1: errno EAGAIN (not ready: see
  // wants_write/wants_read), EPROTO (a TLS failure: error() says why) or, for write, EPIPE
  // (the peer closed). write never returns 0, as send() never does for n > 0: an event loop
  // that sends until its queue is empty counts 0 as neither progress nor error, and a peer
  // that connected and closed before saying anything once held such a loop in a busy spin.
  ssize_t read(void* buf, size_t n);
  ssize_t write(const void* buf, size_t n);
  bool wants_write() const { return want_write_; }  // the last call waits for POLLOUT
  bool wants_read() const { return want_read_; }    // the last call waits for POLLIN
  size_t pending() const;                           // decrypted bytes not read yet
  bool established() const;                         // the handshake is done
  // The common name (CN) of the peer's certificate, once the handshake is done and the
  // certificate verified against the job CA ("client-3"); empty before, or without one. It is
  // who the job CA says the peer is: a server binds a claimed identity to it.
  std::string peer_name() const;
  const std::string& error() const { return error_; }

  // Runs the handshake to its end, polling the socket, by the deadline. AuthRefused "TLS
  // handshake with <what> failed: <reason>" for a certificate either side refuses, IoError if
  // the peer hangs up, Timeout past the deadline.
  void handshake(std::chrono::steady_clock::time_point deadline, std::string_view what);
  // Blocking helpers over the stream (for handshakes after TLS's): all n bytes by the deadline.
  void read_exact(void* buf, size_t n, std::chrono::steady_clock::time_point deadline,
                  std::string_view what);
  void write_all(const void* buf, size_t n, std::chrono::steady_clock::time_point deadline,
                 std::string_view what);

 private:
  ssize_t finish(int rc);  // maps an SSL_read/SSL_write result
  // Returns if r is "not ready"; else AuthRefused for a TLS failure, IoError for a hang-up.
  void check_progress(ssize_t r, std::string_view what) const;
  void wait(std::chrono::steady_clock::time_point deadline, std::string_view what) const;

  SSL* ssl_ = nullptr;
  int fd_;
  bool want_write_ = false, want_read_ = false;
  std::string error_;
};

}  // namespace cohort::net
