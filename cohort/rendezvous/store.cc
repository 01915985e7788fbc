#include "cohort/rendezvous/store.h"

#include <cstdio>

#include "cohort/core/error.h"

namespace cohort::rendezvous {
namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f s", s);
  return buf;
}

void check_timeout(std::string_view op, Millis timeout) {
  COHORT_CHECK_ARG(timeout.count() >= 0, "store ", op, ": negative timeout ", timeout.count(),
                   " ms");
}

}  // namespace

Store::Store(StoreOptions options) : options_(options) {
  check_timeout("options", options.timeout);
}

void Store::set_timeout(Millis timeout) {
  check_timeout("set_timeout", timeout);
  options_.timeout = timeout;
}

void Store::set(const std::string& key, const Bytes& value) {
  check_key("set", key);
  check_value("set", key, value.size());
  do_set(key, value);
}

Bytes Store::get(const std::string& key, Millis timeout) {
  check_key("get", key);
  check_timeout("get", timeout);
  return do_get(key, timeout);
}

int64_t Store::add(const std::string& key, int64_t delta) {
  check_key("add", key);
  return do_add(key, delta);
}

Bytes Store::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  check_key("compare_set", key);
  check_value("compare_set", key, expected.size());
  check_value("compare_set", key, desired.size());
  return do_compare_set(key, expected, desired);
}

bool Store::delete_key(const std::string& key) {
  check_key("delete_key", key);
  return do_delete_key(key);
}

bool Store::check(const std::vector<std::string>& keys) {
  for (const auto& k : keys) check_key("check", k);
  return do_check(keys);
}

void Store::wait(const std::vector<std::string>& keys, Millis timeout) {
  for (const auto& k : keys) check_key("wait", k);
  check_timeout("wait", timeout);
  if (keys.empty()) return;
  do_wait(keys, timeout);
}

void Store::set_string(const std::string& key, std::string_view value) {
  set(key, to_bytes(value));
}

std::string Store::get_string(const std::string& key, Millis timeout) {
  return to_string(get(key, timeout));
}

std::string quote_keys(const std::vector<std::string>& keys) {
  constexpr size_t kShown = 8;  // a barrier over 1000 ranks must not print 1000 keys
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) {
    if (i) out += ", ";
    out += "'" + keys[i] + "'";
  }
  if (keys.size() > kShown) out += detail::str(" and ", keys.size() - kShown, " more");
  return out;
}

void throw_store_timeout(std::string_view store, std::string_view op,
                         const std::vector<std::string>& missing, Clock::time_point start,
                         Millis timeout) {
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  throw Timeout(detail::str(store, ": ", op, " timed out after ", seconds(elapsed), " (timeout ",
                            seconds(timeout.count() / 1000.0), ") waiting for key",
                            missing.size() == 1 ? " " : "s ", quote_keys(missing),
                            "; check that every rank is running and reaches this point"));
}

void check_key(std::string_view op, const std::string& key) {
  COHORT_CHECK_ARG(!key.empty(), "store ", op, ": empty key");
  COHORT_CHECK_ARG(key.size() <= kMaxKeyBytes, "store ", op, ": key of ", key.size(),
                   " bytes exceeds the limit of ", kMaxKeyBytes, " (starts '", key.substr(0, 64),
                   "')");
}

void check_value(std::string_view op, const std::string& key, size_t size) {
  COHORT_CHECK_ARG(size <= kMaxValueBytes, "store ", op, ": value of ", size, " bytes for key '",
                   key, "' exceeds the limit of ", kMaxValueBytes, " bytes");
}

}  // namespace cohort::rendezvous
