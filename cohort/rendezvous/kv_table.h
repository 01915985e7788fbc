#pragma once
// KvTable: the key-value semantics shared by HashStore and TcpStoreServer, so that the
// in-process store and the network store cannot drift apart (add's decimal counters,
// compare_set's rule for absent keys). Not thread-safe: each owner guards it.
#include <string>
#include <unordered_map>
#include <vector>

#include "cohort/rendezvous/store.h"

namespace cohort::rendezvous {

class KvTable {
 public:
  void set(const std::string& key, Bytes value) { map_[key] = std::move(value); }
  // nullptr if absent. Valid until the next mutation.
  const Bytes* find(const std::string& key) const;
  // See Store::add. Throws InvalidArgument (naming the key) on a non-integer value or overflow.
  int64_t add(const std::string& key, int64_t delta);
  // See Store::compare_set. *changed tells whether the key was written.
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired,
                    bool* changed);
  bool erase(const std::string& key) { return map_.erase(key) > 0; }
  bool contains_all(const std::vector<std::string>& keys) const;
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;
  size_t size() const { return map_.size(); }

 private:
  std::unordered_map<std::string, Bytes> map_;
};

}  // namespace cohort::rendezvous
