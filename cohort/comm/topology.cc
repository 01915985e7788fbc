#include "cohort/comm/topology.h"

#include <unistd.h>

#include <fstream>
#include <map>

#include "cohort/core/error.h"
#include "cohort/rendezvous/store.h"

namespace cohort::comm {

std::vector<int> HostTopology::leaders() const {
  std::vector<int> out;
  for (const auto& h : hosts) out.push_back(h.front());
  return out;
}

bool HostTopology::is_hierarchical() const {
  return hosts.size() > 1 && hosts.size() < host_of.size();
}

HostTopology HostTopology::from_ids(const std::vector<std::string>& ids) {
  HostTopology t;
  std::map<std::string, int> index;
  for (size_t r = 0; r < ids.size(); ++r) {
    auto [it, fresh] = index.emplace(ids[r], int(t.hosts.size()));
    if (fresh) t.hosts.emplace_back();
    t.hosts[size_t(it->second)].push_back(int(r));
    t.host_of.push_back(it->second);
  }
  return t;
}

std::string HostTopology::describe() const {
  std::string out = detail::str(hosts.size(), hosts.size() == 1 ? " host:" : " hosts:");
  for (const auto& h : hosts) {
    out += " [";
    for (size_t i = 0; i < h.size(); ++i) out += detail::str(i ? " " : "", h[i]);
    out += "]";
  }
  return out;
}

namespace {
std::string first_line(const char* path) {
  std::ifstream f(path);
  std::string s;
  if (f) std::getline(f, s);
  return s;
}
}  // namespace

std::string default_host_id() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  char net[128] = {};
  ssize_t n = ::readlink("/proc/self/ns/net", net, sizeof(net) - 1);
  if (n < 0) net[0] = 0;
  return detail::str(host, "/", first_line("/proc/sys/kernel/random/boot_id"), "/", net);
}

HostTopology exchange_host_ids(rendezvous::Store& store, const std::string& prefix, int rank,
                               int size, const std::string& id, std::chrono::milliseconds timeout) {
  COHORT_CHECK_ARG(!id.empty(), "communicator: rank ", rank, " has an empty host id");
  auto key = [&](int r) { return detail::str(prefix, "/host/", r); };
  if (size == 1) return HostTopology::from_ids({id});
  store.set_string(key(rank), id);
  std::vector<std::string> keys, ids;
  for (int r = 0; r < size; ++r) keys.push_back(key(r));
  store.wait(keys, timeout);
  for (int r = 0; r < size; ++r) ids.push_back(r == rank ? id : store.get_string(keys[size_t(r)]));
  return HostTopology::from_ids(ids);
}

}  // namespace cohort::comm
