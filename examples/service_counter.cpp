// The service channel in one program (docs/service.md): a server that keeps a running total,
// a client that adds to it with requests, and a message the server pushes to that client.
// In a real job the server and its clients are different processes sharing the job secret.
// Run: build/bin/service_counter
#include <atomic>
#include <cstdio>
#include <string>

#include "cohort/net/service/client.h"
#include "cohort/net/service/server.h"

using namespace cohort::net::service;

static Bytes bytes(const std::string& s) {
  return Bytes(s.begin(), s.end());
}
static std::string text(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

int main() {
  // A job shares one secret (cohort run passes it as COHORT_JOB_SECRET).
  const auto secret = cohort::net::Secret::generate();

  long total = 0;  // touched by the server's loop thread only: handlers run there, one at a time
  std::atomic<uint64_t> last_peer{0};
  Handlers h;
  h.on_join = [&](const Peer& p) {
    std::printf("peer %llu joined from %s\n", (unsigned long long)p.id, p.address.c_str());
    last_peer = p.id;
  };
  h.on_leave = [](const Peer& p, const std::string& why) {
    std::printf("peer %llu left%s%s\n", (unsigned long long)p.id, why.empty() ? "" : ": ",
                why.c_str());
  };
  h.on_request = [&](const Peer&, uint64_t, Bytes q) -> std::optional<Bytes> {
    total += std::stol(text(q));  // a bad number throws: the client gets InvalidArgument
    return bytes(std::to_string(total));
  };
  Server server({.secret = secret, .name = "counter"}, h);  // loopback, a port the OS picks

  {
    Client client({.port = server.port(), .secret = secret, .name = "counter"});
    for (int i = 1; i <= 3; ++i) {
      Bytes answer = client.request(bytes(std::to_string(i)));
      std::printf("total after +%d: %s\n", i, text(answer).c_str());
    }
    server.send(last_peer, bytes("done, thank you"));
    auto pushed = client.receive(std::chrono::seconds(10));
    std::printf("the server says: %s\n", pushed ? text(*pushed).c_str() : "(nothing)");
  }  // the client leaves; the server reports it
  server.stop();
  return total == 6 ? 0 : 1;
}
