// Context creation: the connection protocol of context.h.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cohort/comm/transport/context.h"
#include "cohort/comm/transport/shm/shm_arena.h"
#include "cohort/comm/transport/shm/shm_pair.h"
#include "cohort/comm/transport/tcp/tcp_endpoint.h"
#include "cohort/comm/transport/tcp/tcp_pair.h"
#include "cohort/core/logging.h"
#include "cohort/rendezvous/store.h"

namespace cohort::comm::transport {
namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  if (f) std::getline(f, s);
  return s;
}

std::string read_link(const char* path) {
  char buf[256];
  ssize_t n = ::readlink(path, buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

// Ranks with equal identities share /dev/shm and a kernel. The network namespace is part of
// it so that ranks in separate namespaces (simulated hosts) talk TCP, as across real hosts;
// the pid namespace because shm checks that its peer's pid is alive.
std::string host_identity() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return detail::str(host, "/", read_first_line("/proc/sys/kernel/random/boot_id"), "/",
                     read_link("/proc/self/ns/net"), "/", read_link("/proc/self/ns/ipc"), "/",
                     read_link("/proc/self/ns/pid"));
}

// What each rank publishes at "<prefix>/info/<rank>", one field per line.
struct PeerInfo {
  std::string mode;     // transport_name() of the rank's device
  std::string host;     // host_identity()
  std::string address;  // TCP "host:port", or "-"
  bool auth = false;    // whether its TCP connections use the job secret
  int cpu = -1;         // the one CPU it is pinned to (backoff.h pinned_cpu), or -1

  std::string encode() const {
    return detail::str("v2\n", mode, "\n", host, "\n", address, "\n", auth ? 1 : 0, "\n", cpu,
                       "\n");
  }
  static PeerInfo decode(const std::string& s, int rank) {
    std::istringstream in(s);
    std::string version, auth, cpu;
    PeerInfo p;
    std::getline(in, version);
    std::getline(in, p.mode);
    std::getline(in, p.host);
    std::getline(in, p.address);
    std::getline(in, auth);
    std::getline(in, cpu);
    char* end = nullptr;
    p.cpu = int(std::strtol(cpu.c_str(), &end, 10));
    COHORT_CHECK_IO(version == "v2" && !p.host.empty() && (auth == "0" || auth == "1") &&
                        !cpu.empty() && *end == 0,
                    "transport: rank ", rank, " published an unreadable address record (", s.size(),
                    " bytes); is it running another cohort version?");
    p.auth = auth == "1";
    return p;
  }
};

bool is_loopback_address(const std::string& address) {  // "host:port" or a host
  return address.rfind("127.", 0) == 0 || address.rfind("[::1]", 0) == 0 || address == "::1" ||
         address.rfind("localhost", 0) == 0;
}

}  // namespace

std::unique_ptr<Context> Context::create(const Device& device, rendezvous::Store& store, int rank,
                                         int size, const ContextOptions& options) {
  COHORT_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "transport::Context: rank ", rank,
                   " is not in [0, ", size, ")");
  std::unique_ptr<Context> ctx(new Context(rank, size));
  ctx->pairs_.resize(size_t(size));
  ctx->faults_ = device.options().faults;
  if (size > 1) ctx->connect(device, store, options);
  ctx->backoff_policy_ = Backoff::policy_for(ctx->local_ranks_, ctx->own_core_);
  ctx->spin_.reset(ctx->backoff_policy_.spin, ctx->backoff_policy_.adaptive);
  return ctx;
}

namespace {
Millis left_until(Deadline deadline) {
  return std::max(std::chrono::duration_cast<Millis>(deadline - Clock::now()), Millis(1));
}
}  // namespace

// The connection protocol is described in context.h.
void Context::connect(const Device& device, rendezvous::Store& store,
                      const ContextOptions& options) {
  const DeviceOptions& dev = device.options();
  Deadline deadline = Clock::now() + options.connect_timeout;
  if (dev.transport != TransportKind::kShm) {
    COHORT_CHECK_ARG(!dev.secret.empty() || is_loopback_address(dev.bind_address),
                     "tcp transport: binding ", dev.bind_address,
                     " needs a job secret (DeviceOptions.secret); only loopback addresses may "
                     "run without one");
    tcp_ = std::make_unique<TcpEndpoint>(dev, rank_, size_, notifier_.get());
  }
  Plan plan = plan_peers(dev, store, options.prefix, deadline);
  connect_pairs(plan, dev, store, options.prefix, deadline);
  if (int(plan.shm_peers.size()) == size_ - 1) {
    connect_arenas(dev, store, options.prefix, deadline);
  }
  std::vector<TcpPair*> tcp_pairs;
  for (auto& p : pairs_) {
    if (!p) continue;
    if (p->caller_driven()) {
      polled_.push_back(p.get());
    } else {
      tcp_pairs.push_back(static_cast<TcpPair*>(p.get()));
    }
  }
  if (!tcp_pairs.empty()) tcp_->start(tcp_pairs);
  log::debug("comm", "rank ", rank_, "/", size_, " connected: ", polled_.size(), " shm, ",
             tcp_pairs.size(), " tcp pairs");
}

// Steps 1-2: publish our record, read everyone's, choose a transport per peer.
Context::Plan Context::plan_peers(const DeviceOptions& dev, rendezvous::Store& store,
                                  const std::string& prefix, Deadline deadline) {
  PeerInfo mine{transport_name(dev.transport), host_identity(), tcp_ ? tcp_->address() : "-",
                !dev.secret.empty(), pinned_cpu()};
  own_core_ = mine.cpu >= 0;
  auto info_key = [&](int r) { return detail::str(prefix, "/info/", r); };
  store.set_string(info_key(rank_), mine.encode());
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(info_key(r));
  store.wait(keys, left_until(deadline));
  Plan plan;
  plan.tcp_address.resize(size_t(size_));
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    PeerInfo p = PeerInfo::decode(store.get_string(keys[size_t(r)]), r);
    COHORT_CHECK_ARG(p.mode == mine.mode, "transport: rank ", rank_, " uses transport '", mine.mode,
                     "' but rank ", r, " uses '", p.mode,
                     "'; every rank must configure the same transport");
    bool same_host = p.host == mine.host;
    if (same_host) ++local_ranks_;
    if (same_host && p.cpu == mine.cpu) own_core_ = false;  // pinned, but not alone
    if (dev.transport == TransportKind::kShm ||
        (dev.transport == TransportKind::kAuto && same_host)) {
      COHORT_CHECK_ARG(same_host, "shm transport: rank ", r, " runs on another host (", p.host,
                       " vs ", mine.host, "); use transport auto or tcp");
      plan.shm_peers.push_back(r);
      continue;
    }
    COHORT_CHECK_ARG(p.auth == mine.auth, "tcp transport: rank ", rank_,
                     mine.auth ? " has" : " has no", " job secret but rank ", r,
                     p.auth ? " has one" : " has none");
    COHORT_CHECK_ARG(same_host || !is_loopback_address(p.address), "tcp transport: rank ", r,
                     " is on another host but listens on loopback (", p.address,
                     "); set DeviceOptions.bind_address to an address peers can reach");
    (r < rank_ ? plan.tcp_lower : plan.tcp_higher).push_back(r);
    plan.tcp_address[size_t(r)] = p.address;
  }
  return plan;
}

// Step 3. Order matters for progress: segment creation never blocks, TCP connects go to lower
// ranks (which finish their own connects first, inductively from rank 0), and only then do we
// block on peers' segment names and acknowledgements.
void Context::connect_pairs(const Plan& plan, const DeviceOptions& dev, rendezvous::Store& store,
                            const std::string& prefix, Deadline deadline) {
  auto shm_key = [&](int lo, int hi) { return detail::str(prefix, "/shm/", lo, "-", hi); };
  std::vector<ShmPair*> created;
  for (int r : plan.shm_peers) {
    if (r < rank_) continue;
    std::string name;
    auto p = ShmPair::create(rank_, r, dev, &name);
    p->count_single_copy_in(&single_copy_bytes_);
    created.push_back(p.get());
    pairs_[size_t(r)] = std::move(p);
    store.set_string(shm_key(rank_, r), name);
  }
  for (int r : plan.tcp_lower) {
    pairs_[size_t(r)] = tcp_->connect_to(r, plan.tcp_address[size_t(r)], deadline);
  }
  if (!plan.tcp_higher.empty()) {
    auto accepted = tcp_->accept_from(plan.tcp_higher, deadline);
    for (size_t i = 0; i < accepted.size(); ++i) {
      pairs_[size_t(plan.tcp_higher[i])] = std::move(accepted[i]);
    }
  }
  for (int r : plan.shm_peers) {
    if (r > rank_) continue;
    std::string name = store.get_string(shm_key(r, rank_), left_until(deadline));
    auto p = ShmPair::open(rank_, r, dev, name);
    p->count_single_copy_in(&single_copy_bytes_);
    p->probe_single_copy();  // the creator's pid and mapping address are published
    pairs_[size_t(r)] = std::move(p);
    store.set_string(shm_key(r, rank_) + "/ack", "1");
  }
  for (ShmPair* p : created) {
    store.wait({shm_key(rank_, p->peer()) + "/ack"}, left_until(deadline));
    p->unlink_name();
    p->probe_single_copy();  // the peer has mapped the segment: its pid is published
  }
}

// Every rank creates its arena and publishes the name; each maps every peer's, says so, and the
// owner unlinks its name once all have (nothing to clean up after a crash from then on).
void Context::connect_arenas(const DeviceOptions& dev, rendezvous::Store& store,
                             const std::string& prefix, Deadline deadline) {
  auto key = [&](int r) { return detail::str(prefix, "/arena/", r); };
  // A rank without an arena (shm_arena_bytes == 0) publishes "none"; then nobody keeps one,
  // since an allreduce in place needs every rank's buffer in an arena.
  std::string name = "none";
  if (dev.shm_arena_bytes > 0) arena_ = ShmArena::create(dev.shm_arena_bytes, rank_, &name);
  store.set_string(key(rank_), name);
  peer_arenas_.resize(size_t(size_));
  bool everyone = arena_ != nullptr;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    std::string peer_name = store.get_string(key(r), left_until(deadline));
    if (peer_name == "none") {
      everyone = false;
    } else if (arena_) {
      peer_arenas_[size_t(r)] = ShmArena::open(peer_name, r);
    }
    store.set_string(detail::str(key(r), "/mapped-by/", rank_), "1");
  }
  std::vector<std::string> acks;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) acks.push_back(detail::str(key(rank_), "/mapped-by/", r));
  }
  store.wait(acks, left_until(deadline));
  if (arena_) arena_->unlink_name();
  if (!everyone) {
    arena_.reset();
    peer_arenas_.assign(size_t(size_), nullptr);
  }
}

}  // namespace cohort::comm::transport
