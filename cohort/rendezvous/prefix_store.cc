#include "cohort/rendezvous/prefix_store.h"

#include "cohort/core/error.h"

namespace cohort::rendezvous {

namespace {
StoreOptions inherit(const std::shared_ptr<Store>& inner) {
  COHORT_CHECK_ARG(inner != nullptr, "PrefixStore: the wrapped store is null");
  return StoreOptions{inner->timeout()};
}
}  // namespace

PrefixStore::PrefixStore(std::shared_ptr<Store> inner, std::string prefix)
    : Store(inherit(inner)), inner_(std::move(inner)), prefix_(std::move(prefix)) {
  COHORT_CHECK_ARG(!prefix_.empty(), "PrefixStore: empty prefix over ", inner_->describe());
}

std::string PrefixStore::describe() const {
  return inner_->describe() + " (prefix '" + prefix_ + "/')";
}

std::vector<std::string> PrefixStore::full(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(full(k));
  return out;
}

void PrefixStore::do_set(const std::string& key, const Bytes& value) {
  inner_->set(full(key), value);
}
Bytes PrefixStore::do_get(const std::string& key, Millis timeout) {
  return inner_->get(full(key), timeout);
}
int64_t PrefixStore::do_add(const std::string& key, int64_t delta) {
  return inner_->add(full(key), delta);
}
Bytes PrefixStore::do_compare_set(const std::string& key, const Bytes& expected,
                                  const Bytes& desired) {
  return inner_->compare_set(full(key), expected, desired);
}
bool PrefixStore::do_delete_key(const std::string& key) {
  return inner_->delete_key(full(key));
}
bool PrefixStore::do_check(const std::vector<std::string>& keys) {
  return inner_->check(full(keys));
}
void PrefixStore::do_wait(const std::vector<std::string>& keys, Millis timeout) {
  inner_->wait(full(keys), timeout);
}

}  // namespace cohort::rendezvous
