#pragma once
// Network namespaces for multi-host tests (tests/comm/netns_test.cc, tests/e2e/
// elastic_nodes_test.cc): two "hosts" joined by a veth pair. Needs root (ip netns add); a test
// skips with error() otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cohort/core/error.h"

namespace cohort::testing {

// Runs a shell command; returns its exit status and (in *output) what it printed.
inline int shell(const std::string& cmd, std::string* output = nullptr) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[256];
  std::string out;
  while (std::fgets(buf, sizeof(buf), p)) out += buf;
  int status = ::pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Two namespaces ("hosts") joined by a veth pair with the two addresses (/24), loopback up in
// each; deleted in the destructor. error() says why when they could not be made (not root).
class Namespaces {
 public:
  Namespaces(const std::string& address0, const std::string& address1)
      : address_{address0, address1} {
    std::string tag = std::to_string(::getpid());
    for (int h = 0; h < 2; ++h) names_.push_back(detail::str("cohort_t", tag, "_", h));
    std::string out;
    if (shell("ip netns add " + names_[0], &out) != 0) {
      error_ = "ip netns add is not permitted here (needs root / CAP_SYS_ADMIN): " + out;
      names_.resize(0);
      return;
    }
    created_ = 1;
    if (!run("ip netns add " + names_[1])) return;
    created_ = 2;
    std::string va = "cva" + tag, vb = "cvb" + tag;
    va.resize(std::min<size_t>(va.size(), 15));
    vb.resize(std::min<size_t>(vb.size(), 15));
    veth_ = {va, vb};
    const std::vector<std::string>& veth = veth_;
    if (!run(detail::str("ip link add ", va, " netns ", names_[0], " type veth peer name ", vb,
                         " netns ", names_[1]))) {
      return;
    }
    for (int h = 0; h < 2; ++h) {
      std::string n = "ip -n " + names_[size_t(h)];
      if (!run(detail::str(n, " addr add ", address_[size_t(h)], "/24 dev ", veth[h])) ||
          !run(detail::str(n, " link set ", veth[h], " up")) || !run(n + " link set lo up")) {
        return;
      }
    }
  }
  ~Namespaces() {
    for (int h = 0; h < created_; ++h) shell("ip netns del " + names_[size_t(h)]);
  }
  const std::string& error() const { return error_; }
  const std::string& name(int host) const { return names_[size_t(host)]; }
  const std::string& veth(int host) const { return veth_[size_t(host)]; }
  const std::string& address(int host) const { return address_[size_t(host)]; }

 private:
  bool run(const std::string& cmd) {
    std::string out;
    if (shell(cmd, &out) == 0) return true;
    error_ = detail::str("`", cmd, "` failed: ", out);
    return false;
  }
  std::vector<std::string> address_, names_, veth_;
  int created_ = 0;
  std::string error_;
};

}  // namespace cohort::testing
