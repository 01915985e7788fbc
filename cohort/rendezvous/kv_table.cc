#include "cohort/rendezvous/kv_table.h"

#include <charconv>

#include "cohort/core/error.h"

namespace cohort::rendezvous {

const Bytes* KvTable::find(const std::string& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

int64_t KvTable::add(const std::string& key, int64_t delta) {
  int64_t current = 0;
  auto it = map_.find(key);
  if (it != map_.end()) {
    const char* begin = reinterpret_cast<const char*>(it->second.data());
    const char* end = begin + it->second.size();
    auto [ptr, ec] = std::from_chars(begin, end, current);
    COHORT_CHECK_ARG(ec == std::errc() && ptr == end && begin != end, "store add: key '", key,
                     "' holds a ", it->second.size(),
                     "-byte value that is not a decimal integer counter");
  }
  int64_t next = 0;
  COHORT_CHECK_ARG(!__builtin_add_overflow(current, delta, &next), "store add: key '", key,
                   "' = ", current, " + ", delta, " overflows int64");
  std::string text = std::to_string(next);
  map_[key] = Bytes(text.begin(), text.end());
  return next;
}

Bytes KvTable::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired,
                           bool* changed) {
  *changed = false;
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) return {};
    map_.emplace(key, desired);
    *changed = true;
    return desired;
  }
  if (it->second == expected) {
    it->second = desired;
    *changed = true;
  }
  return it->second;
}

bool KvTable::contains_all(const std::vector<std::string>& keys) const {
  for (const auto& k : keys)
    if (!map_.count(k)) return false;
  return true;
}

std::vector<std::string> KvTable::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys)
    if (!map_.count(k)) out.push_back(k);
  return out;
}

}  // namespace cohort::rendezvous
