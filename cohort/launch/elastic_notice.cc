#include "cohort/launch/elastic_notice.h"

#include <cstdio>

#include "cohort/core/error.h"
#include "cohort/rendezvous/tcp_store.h"

namespace cohort::launch {

std::string elastic_dead_key(int attempt, int rank) {
  return cohort::detail::str("elastic/attempt", attempt, "/dead/", rank);
}

void announce_left_behind(const std::string& host, uint16_t port, const net::Secret& secret,
                          int attempt, int rank, const std::string& how) {
  try {
    rendezvous::TcpStoreOptions o;
    o.host = host;
    o.port = port;
    o.secret = secret;
    o.timeout = o.connect_timeout = std::chrono::seconds(2);
    rendezvous::TcpStore store(o);
    store.set_string(elastic_dead_key(attempt, rank), how);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cohort run: could not tell the survivors that rank %d is gone (%s)\n",
                 rank, e.what());
  }
}

}  // namespace cohort::launch
