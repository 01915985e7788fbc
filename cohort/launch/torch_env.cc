#include "cohort/launch/torch_env.h"

#include <charconv>
#include <optional>

#include "cohort/core/error.h"
#include "cohort/net/auth.h"
#include "cohort/net/socket.h"
#include "cohort/rendezvous/tcp_store.h"

namespace cohort::launch::detail {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Waits are cut into slices this long, so SIGINT/SIGTERM to the launcher is noticed quickly.
constexpr milliseconds kSlice{500};

rendezvous::TcpStoreOptions store_options(const JobPlan& plan, uint16_t store_port) {
  rendezvous::TcpStoreOptions o;
  // Node 0 hosts the store; a wildcard bind address is reached through loopback.
  o.host = plan.store_host == "0.0.0.0" ? "127.0.0.1" : plan.store_host;
  o.port = store_port;
  o.secret = plan.secret;
  o.timeout = kSlice;
  o.connect_timeout = kSlice;
  return o;
}

uint16_t parse_port(const std::string& s, const std::string& key) {
  int port = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), port);
  COHORT_CHECK_IO(ec == std::errc() && end == s.data() + s.size() && port > 0 && port <= 65535,
                  "cohort run: node 0 published '", s, "' as MASTER_PORT under ", key,
                  ", which is not a port");
  return uint16_t(port);
}

// Node k > 0: the port node 0 published, or nullopt if a signal came first.
std::optional<uint16_t> fetch_port(const JobPlan& plan, uint16_t store_port, int restart,
                                   SignalRelay& relay, milliseconds wait, int* signal) {
  const auto deadline = Clock::now() + wait;
  const std::string key = torch_port_key(restart);
  std::optional<rendezvous::TcpStore> store;
  for (;;) {
    if ((*signal = relay.take()) != 0) return std::nullopt;
    std::optional<std::string> published;
    try {
      if (!store) store.emplace(store_options(plan, store_port));
      published = store->get_string(key, kSlice);
    } catch (const Timeout&) {
      // node 0 is not up yet, or has not published: try again until the deadline
    } catch (const net::AuthRefused&) {
      throw;  // a wrong secret: say so now
    } catch (const IoError&) {
      store.reset();  // node 0 closed the previous attempt's store: connect to the next one
    }
    if (published) return parse_port(*published, key);
    COHORT_CHECK_T(Clock::now() < deadline, Timeout,
                   "cohort run: node 0's launcher did not publish ", "MASTER_PORT in the store at ",
                   plan.store_host, ":", store_port, " within ", wait.count() / 1000,
                   " s (is node 0 running with the same --master and secret?)");
  }
}

}  // namespace

uint16_t pick_free_port(const std::string& host) {
  net::Listener l = net::listen_tcp(host, 0, 1);
  return l.port;  // the socket closes here; the port stays free unless someone else takes it
}

std::string torch_port_key(int restart) {
  return cohort::detail::str("cohort/launch/attempt", restart, "/torch_master_port");
}

uint16_t agree_torch_port(const LaunchOptions& options, const JobPlan& plan, uint16_t store_port,
                          int restart, SignalRelay& relay, milliseconds wait, int* signal) {
  *signal = 0;
  if (options.nnodes == 1) return pick_free_port(plan.store_host);
  if (options.node_rank > 0)
    return fetch_port(plan, store_port, restart, relay, wait, signal).value_or(0);
  const uint16_t port = pick_free_port(plan.store_host);
  rendezvous::TcpStoreOptions o = store_options(plan, store_port);
  o.connect_timeout = std::chrono::seconds(10);  // our own server, already listening
  rendezvous::TcpStore(o).set_string(torch_port_key(restart), std::to_string(port));
  return port;
}

void add_torch_env(rendezvous::EnvMap& env, const LaunchOptions& options, const JobPlan& plan,
                   int local_rank, int restart, uint16_t torch_port) {
  const int world = options.nnodes * options.nproc_per_node;
  const int rank = options.node_rank * options.nproc_per_node + local_rank;
  auto set = [&env](const char* k, const auto& v) { env[k] = cohort::detail::str(v); };
  set("RANK", rank);
  set("WORLD_SIZE", world);
  set("LOCAL_RANK", local_rank);
  set("LOCAL_WORLD_SIZE", options.nproc_per_node);
  set("GROUP_RANK", options.node_rank);
  set("GROUP_WORLD_SIZE", options.nnodes);
  set("ROLE_NAME", "default");
  set("ROLE_RANK", rank);
  set("ROLE_WORLD_SIZE", world);
  set("MASTER_ADDR", plan.store_host);
  set("MASTER_PORT", torch_port);
  set("TORCHELASTIC_RESTART_COUNT", restart);
  set("TORCHELASTIC_MAX_RESTARTS", options.max_restarts);
}

}  // namespace cohort::launch::detail
