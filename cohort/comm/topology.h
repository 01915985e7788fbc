#pragma once
// Which ranks of a communicator share a host, for hierarchical algorithms.
//
// Each rank publishes a host id through the store when its communicator is created:
// CommOptions::host_id if set (tests make ranks of one machine pretend to be several hosts),
// else default_host_id(). Ranks with equal ids form a host; its lowest rank is the leader.
// Every rank reads the same records, so every rank builds the same topology and algorithm
// choices that depend on it agree.
#include <chrono>
#include <string>
#include <vector>

namespace cohort::rendezvous {
class Store;
}

namespace cohort::comm {

struct HostTopology {
  std::vector<int> host_of;             // by rank: index of its host
  std::vector<std::vector<int>> hosts;  // ranks of each host, ascending; hosts by lowest rank

  int num_hosts() const { return int(hosts.size()); }
  const std::vector<int>& local_ranks(int rank) const {
    return hosts[size_t(host_of[size_t(rank)])];
  }
  // The lowest rank of every host, in host order.
  std::vector<int> leaders() const;
  // More than one host, and at least one with several ranks: hierarchy pays off.
  bool is_hierarchical() const;
  // ids[r] is rank r's host id.
  static HostTopology from_ids(const std::vector<std::string>& ids);
  std::string describe() const;  // "2 hosts: [0 1] [2 3]"
};

// Host name, boot id and network namespace: ranks in separate network namespaces (the
// multi-host tests' simulated hosts) count as separate hosts, as they do for the transport.
std::string default_host_id();

// Publishes `id` at "<prefix>/host/<rank>", waits for every rank's, builds the topology.
// Throws Timeout naming the missing ranks after `timeout`.
HostTopology exchange_host_ids(rendezvous::Store& store, const std::string& prefix, int rank,
                               int size, const std::string& id, std::chrono::milliseconds timeout);

}  // namespace cohort::comm
