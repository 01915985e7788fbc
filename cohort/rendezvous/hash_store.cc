#include "cohort/rendezvous/hash_store.h"

namespace cohort::rendezvous {

void HashStore::do_set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    table_.set(key, value);
  }
  changed_.notify_all();
}

void HashStore::wait_locked(std::unique_lock<std::mutex>& lock,
                            const std::vector<std::string>& keys, Millis timeout,
                            std::string_view op) {
  auto start = Clock::now();
  bool ok = changed_.wait_until(lock, start + timeout, [&] { return table_.contains_all(keys); });
  if (!ok) throw_store_timeout(describe(), op, table_.missing(keys), start, timeout);
}

Bytes HashStore::do_get(const std::string& key, Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, {key}, timeout, "get");
  return *table_.find(key);
}

int64_t HashStore::do_add(const std::string& key, int64_t delta) {
  int64_t out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = table_.add(key, delta);
  }
  changed_.notify_all();
  return out;
}

Bytes HashStore::do_compare_set(const std::string& key, const Bytes& expected,
                                const Bytes& desired) {
  bool changed = false;
  Bytes out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = table_.compare_set(key, expected, desired, &changed);
  }
  if (changed) changed_.notify_all();
  return out;
}

bool HashStore::do_delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.erase(key);
}

bool HashStore::do_check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.contains_all(keys);
}

void HashStore::do_wait(const std::vector<std::string>& keys, Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, keys, timeout, "wait");
}

}  // namespace cohort::rendezvous
