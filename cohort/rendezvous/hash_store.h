#pragma once
// HashStore: an in-process Store for tests that run ranks as threads. Waiters sleep on a
// condition variable and are woken by every write; nothing polls.
#include <condition_variable>
#include <mutex>

#include "cohort/rendezvous/kv_table.h"
#include "cohort/rendezvous/store.h"

namespace cohort::rendezvous {

class HashStore : public Store {
 public:
  explicit HashStore(StoreOptions options = {}) : Store(options) {}
  std::string describe() const override { return "HashStore"; }

 protected:
  void do_set(const std::string& key, const Bytes& value) override;
  Bytes do_get(const std::string& key, Millis timeout) override;
  int64_t do_add(const std::string& key, int64_t delta) override;
  Bytes do_compare_set(const std::string& key, const Bytes& expected,
                       const Bytes& desired) override;
  bool do_delete_key(const std::string& key) override;
  bool do_check(const std::vector<std::string>& keys) override;
  void do_wait(const std::vector<std::string>& keys, Millis timeout) override;

 private:
  // Blocks until every key is present; returns with mu_ held by `lock`.
  void wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                   Millis timeout, std::string_view op);

  std::mutex mu_;  // guards table_
  std::condition_variable changed_;
  KvTable table_;
};

}  // namespace cohort::rendezvous
