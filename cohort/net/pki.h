#pragma once
// A job's public-key infrastructure, for TLS on the service channel (tls.h): one CA made for
// the job, a server certificate and client certificates it signs. `cohort fl keys DIR` writes
//   ca.pem, ca.key            the CA (keep ca.key with whoever adds clients)
//   server.pem, server.key    for the server; its subjectAltName lists server_names
//   client-<i>.pem/.key       one per client (CN client-<i>)
// Keys are EC P-256, private key files mode 0600, every file written atomically (temp +
// rename). A client gets ca.pem and its own pair; the server ca.pem and server.*.
#include <cstdint>
#include <string>
#include <vector>

namespace cohort::net {

struct PkiOptions {
  // Names and addresses clients dial the server at (an entry that parses as an IP address
  // becomes an IP SAN, others DNS SANs).
  std::vector<std::string> server_names{"localhost", "127.0.0.1"};
  int clients = 0;
  int days = 365;
};

// "client-<i>": client i's certificate's CN and file stem. A server that knows this
// convention binds the id a client claims to the certificate it presented.
std::string client_cert_name(int64_t i);

// Makes DIR (mode 0700) and writes the files above. InvalidArgument if DIR already holds a
// ca.key (a job's CA is never overwritten by accident); IoError naming a file that cannot be
// written.
void write_job_pki(const std::string& dir, const PkiOptions& options);

// Signs client certificates first..first+count-1 with the CA already in DIR.
void add_client_certs(const std::string& dir, int first, int count, int days = 365);

}  // namespace cohort::net
