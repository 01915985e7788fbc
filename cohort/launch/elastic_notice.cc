#include "cohort/launch/elastic_notice.h"

#include <cstdio>

#include "cohort/core/error.h"
#include "cohort/rendezvous/tcp_store.h"

namespace cohort::launch {

std::string elastic_dead_key(int attempt, int rank) {
  return cohort::detail::str("elastic/attempt", attempt, "/dead/", rank);
}

namespace {

rendezvous::TcpStoreOptions store_options(const std::string& host, uint16_t port,
                                          const net::Secret& secret) {
  rendezvous::TcpStoreOptions o;
  o.host = host;
  o.port = port;
  o.secret = secret;
  o.timeout = o.connect_timeout = std::chrono::seconds(2);
  return o;
}

}  // namespace

std::string elastic_chief_key(int attempt) {
  return cohort::detail::str("elastic/attempt", attempt, "/chief");
}

std::string elastic_done_key(int attempt) {
  return cohort::detail::str("elastic/attempt", attempt, "/done");
}

bool store_has(const std::string& host, uint16_t port, const net::Secret& secret,
               const std::string& key) {
  try {
    rendezvous::TcpStore store(store_options(host, port, secret));
    return store.check({key});
  } catch (const std::exception&) {
    return false;
  }
}

bool store_answers(const std::string& host, uint16_t port, const net::Secret& secret,
                   std::chrono::milliseconds within) {
  rendezvous::TcpStoreOptions o = store_options(host, port, secret);
  o.timeout = o.connect_timeout = within;
  try {
    rendezvous::TcpStore store(o);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

int elastic_chief(const std::string& host, uint16_t port, const net::Secret& secret, int attempt) {
  try {
    rendezvous::TcpStore store(store_options(host, port, secret));
    const std::string key = elastic_chief_key(attempt);
    return store.check({key}) ? std::stoi(store.get_string(key)) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

void announce_left_behind(const std::string& host, uint16_t port, const net::Secret& secret,
                          int attempt, int rank, const std::string& how) {
  try {
    rendezvous::TcpStore store(store_options(host, port, secret));
    store.set_string(elastic_dead_key(attempt, rank), how);
    for (const char* what : {"/join/", "/admit/"})
      store.delete_key(cohort::detail::str("elastic/attempt", attempt, what, rank));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cohort run: could not tell the survivors that rank %d is gone (%s)\n",
                 rank, e.what());
  }
}

}  // namespace cohort::launch
