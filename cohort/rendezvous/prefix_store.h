#pragma once
// PrefixStore: every key of the wrapped store seen under "<prefix>/". Sub-groups and successive
// jobs on one long-lived store each get their own namespace, so "rank0/port" of group A never
// answers a wait of group B. Keys in errors are the full keys of the wrapped store.
#include <memory>

#include "cohort/rendezvous/store.h"

namespace cohort::rendezvous {

class PrefixStore : public Store {
 public:
  // Takes the wrapped store's timeout as its own default. prefix must be non-empty.
  PrefixStore(std::shared_ptr<Store> inner, std::string prefix);
  std::string describe() const override;
  const std::string& prefix() const { return prefix_; }

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
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> full(const std::vector<std::string>& keys) const;

  std::shared_ptr<Store> inner_;
  std::string prefix_;
};

}  // namespace cohort::rendezvous
