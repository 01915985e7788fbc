#pragma once
// Store: the small key-value service that ranks rendezvous through (DESIGN convention 4).
//
// Ranks publish what others need to find them (ports chosen by the OS, host names, unique ids)
// and block until what they need from others is there. Implementations:
//   HashStore    in-process, for tests that run ranks as threads      (hash_store.h)
//   PrefixStore  namespaces another store, for sub-groups and new jobs  (prefix_store.h)
//   TcpStore     client of a TcpStoreServer, authenticated by the job secret (tcp_store.h)
//
// Semantics shared by every implementation (tests/comm/store_test.cc runs the same checks on
// each):
//   - keys are non-empty strings of at most kMaxKeyBytes; values are bytes, at most
//     kMaxValueBytes;
//   - add() keeps the counter as decimal ASCII, so get_string() of a counter reads "42";
//   - every blocking call has a deadline (the store's timeout() unless one is passed) and
//     throws cohort::Timeout naming the missing keys, the elapsed time and the store.
//
// A Store object may be used from several threads at once.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::rendezvous {

using Bytes = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

inline constexpr size_t kMaxKeyBytes = size_t{64} << 10;    // 64 KiB
inline constexpr size_t kMaxValueBytes = size_t{64} << 20;  // 64 MiB

struct StoreOptions {
  // Deadline of every blocking call that does not pass its own. Long by default: a job's ranks
  // may start minutes apart on a busy cluster.
  Millis timeout = std::chrono::seconds(300);
};

class Store {
 public:
  explicit Store(StoreOptions options = {});
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Sets key to value, replacing any previous value, and releases everyone waiting on it.
  void set(const std::string& key, const Bytes& value);
  // Blocks until key is present, then returns its value. Throws Timeout.
  Bytes get(const std::string& key) { return get(key, timeout()); }
  Bytes get(const std::string& key, Millis timeout);
  // Adds delta to the integer counter at key (absent counts as 0) and returns the new value.
  // InvalidArgument if the key holds something that is not a decimal int64, or on overflow.
  int64_t add(const std::string& key, int64_t delta);
  // Sets key to desired if its current value equals expected (an absent key matches an empty
  // expected). Returns the value held afterwards: equal to desired iff the swap happened (or the
  // key already held desired); empty if the key is still absent.
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired);
  // Removes key; returns whether it was present.
  bool delete_key(const std::string& key);
  // True iff every key is present. Never blocks.
  bool check(const std::vector<std::string>& keys);
  // Blocks until every key is present. Throws Timeout naming the keys still missing.
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  void wait(const std::vector<std::string>& keys, Millis timeout);

  // String helpers: the same operations on text values.
  void set_string(const std::string& key, std::string_view value);
  std::string get_string(const std::string& key) { return get_string(key, timeout()); }
  std::string get_string(const std::string& key, Millis timeout);

  Millis timeout() const { return options_.timeout; }
  void set_timeout(Millis timeout);
  // Names the store in error messages: "HashStore", "store at 127.0.0.1:29500".
  virtual std::string describe() const = 0;

 protected:
  // Implementations see validated arguments (non-empty keys within the size caps).
  virtual void do_set(const std::string& key, const Bytes& value) = 0;
  virtual Bytes do_get(const std::string& key, Millis timeout) = 0;
  virtual int64_t do_add(const std::string& key, int64_t delta) = 0;
  virtual Bytes do_compare_set(const std::string& key, const Bytes& expected,
                               const Bytes& desired) = 0;
  virtual bool do_delete_key(const std::string& key) = 0;
  virtual bool do_check(const std::vector<std::string>& keys) = 0;
  virtual void do_wait(const std::vector<std::string>& keys, Millis timeout) = 0;

 private:
  StoreOptions options_;
};

// Throws the Timeout every store uses, e.g.
//   "HashStore: get timed out after 1.002 s (timeout 1.000 s) waiting for key 'rank1/port';
//    check that every rank is running and reaches this point"
[[noreturn]] void throw_store_timeout(std::string_view store, std::string_view op,
                                      const std::vector<std::string>& missing,
                                      Clock::time_point start, Millis timeout);
// "'a', 'b'" (at most a few keys, then "and N more").
std::string quote_keys(const std::vector<std::string>& keys);
// Validation shared by the stores and the wire parser.
void check_key(std::string_view op, const std::string& key);
void check_value(std::string_view op, const std::string& key, size_t size);

inline Bytes to_bytes(std::string_view s) {
  return Bytes(s.begin(), s.end());
}
inline std::string to_string(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

}  // namespace cohort::rendezvous
