#include "cohort/rendezvous/tcp_store.h"

#include <algorithm>

#include "cohort/core/error.h"
#include "cohort/net/auth.h"

namespace cohort::rendezvous {
namespace {

using wire::Command;

// Extra time, beyond what the server may hold a get/wait, for the answer to arrive.
constexpr Millis kMaxGrace = std::chrono::seconds(30);
// How long a call retries opening an extra pooled connection.
constexpr Millis kReconnectWindow = std::chrono::seconds(5);

wire::Request request(Command c, const std::string& key) {
  wire::Request q;
  q.command = c;
  q.keys = {key};
  return q;
}

}  // namespace

TcpStore::TcpStore(TcpStoreOptions options)
    : Store(StoreOptions{options.timeout}), options_(std::move(options)) {
  net::check_secret(options_.secret, options_.secret_policy, "TcpStore");
  COHORT_CHECK_ARG(options_.port != 0, "TcpStore: no port given for store at ", options_.host,
                   " (the server's port: MASTER_PORT / COHORT_MASTER_PORT)");
  address_ = net::join_host_port(options_.host, options_.port);
  // Connect now, so that a wrong address or secret fails here rather than at first use.
  release(open_connection(net::deadline_after(options_.connect_timeout)));
}

TcpStore::~TcpStore() = default;

net::Fd TcpStore::open_connection(net::Deadline deadline) {
  std::string what = describe();
  net::Fd fd = net::connect_tcp(options_.host, options_.port, deadline, what);
  // The handshake gets its own bound: a server that accepted but is wedged must not hold us
  // for the whole connect retry window.
  net::Deadline auth_deadline = std::min(deadline, net::deadline_after(std::chrono::seconds(30)));
  net::auth::answer_challenge(fd.get(), options_.secret, net::auth::kStoreContext, auth_deadline,
                              what);
  return fd;
}

net::Fd TcpStore::acquire(net::Deadline deadline) {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!idle_.empty()) {
      net::Fd fd = std::move(idle_.back());
      idle_.pop_back();
      return fd;
    }
  }
  // The server was up when we were constructed: a refusal now means it is gone, so retry only
  // briefly rather than for the whole startup window.
  Millis window = std::min(options_.connect_timeout, kReconnectWindow);
  return open_connection(std::min(deadline, net::deadline_after(window)));
}

void TcpStore::release(net::Fd fd) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  idle_.push_back(std::move(fd));
}

wire::Response TcpStore::call(const wire::Request& q, Millis server_wait) {
  Millis grace = std::min(timeout(), kMaxGrace);
  net::Deadline deadline = net::deadline_after(server_wait + std::max(grace, Millis(1000)));
  net::Fd fd = acquire(deadline);
  std::string what = describe();
  const char* op = wire::command_name(q.command);
  Bytes frame;
  wire::encode_request(q, &frame);
  COHORT_CHECK_ARG(frame.size() - wire::kHeaderBytes <= wire::kMaxBodyBytes, what, ": ", op,
                   " request of ", frame.size(), " bytes exceeds the frame limit of ",
                   wire::kMaxBodyBytes);
  // An exception below leaves the stream in an unknown state: fd is closed, not pooled.
  net::write_all(fd.get(), frame.data(), frame.size(), deadline, what, op);
  Bytes buf(wire::kHeaderBytes);
  net::read_exact(fd.get(), buf.data(), buf.size(), deadline, what, op);
  wire::Response r;
  auto res = wire::parse_response(buf, q.command, &r);
  if (res.status == wire::ParseStatus::kNeedMore) {
    buf.resize(res.size);
    net::read_exact(fd.get(), buf.data() + wire::kHeaderBytes, res.size - wire::kHeaderBytes,
                    deadline, what, op);
    res = wire::parse_response(buf, q.command, &r);
  }
  COHORT_CHECK_IO(res.status == wire::ParseStatus::kOk, what, " sent a malformed ", op,
                  " response: ", res.error);
  release(std::move(fd));
  return r;
}

void TcpStore::throw_status(const wire::Request& q, const wire::Response& r,
                            Clock::time_point start, Millis timeout) const {
  if (r.status == wire::Status::kTimeout)
    throw_store_timeout(describe(), wire::command_name(q.command), r.keys.empty() ? q.keys : r.keys,
                        start, timeout);
  throw InvalidArgument(describe() + ": " + to_string(r.value));
}

void TcpStore::do_set(const std::string& key, const Bytes& value) {
  wire::Request q = request(Command::kSet, key);
  q.value = value;
  auto r = call(q, Millis(0));
  if (r.status != wire::Status::kOk) throw_status(q, r, Clock::now(), timeout());
}

Bytes TcpStore::do_get(const std::string& key, Millis timeout) {
  auto start = Clock::now();
  wire::Request q = request(Command::kGet, key);
  q.timeout_ms = uint64_t(timeout.count());
  auto r = call(q, timeout);
  if (r.status != wire::Status::kOk) throw_status(q, r, start, timeout);
  return std::move(r.value);
}

int64_t TcpStore::do_add(const std::string& key, int64_t delta) {
  wire::Request q = request(Command::kAdd, key);
  q.delta = delta;
  auto r = call(q, Millis(0));
  if (r.status != wire::Status::kOk) throw_status(q, r, Clock::now(), timeout());
  return r.number;
}

Bytes TcpStore::do_compare_set(const std::string& key, const Bytes& expected,
                               const Bytes& desired) {
  wire::Request q = request(Command::kCompareSet, key);
  q.expected = expected;
  q.value = desired;
  auto r = call(q, Millis(0));
  if (r.status != wire::Status::kOk) throw_status(q, r, Clock::now(), timeout());
  return std::move(r.value);
}

bool TcpStore::do_delete_key(const std::string& key) {
  wire::Request q = request(Command::kDelete, key);
  auto r = call(q, Millis(0));
  if (r.status != wire::Status::kOk) throw_status(q, r, Clock::now(), timeout());
  return r.number != 0;
}

bool TcpStore::do_check(const std::vector<std::string>& keys) {
  wire::Request q;
  q.command = Command::kCheck;
  q.keys = keys;
  COHORT_CHECK_ARG(keys.size() <= wire::kMaxKeysPerRequest, describe(), ": check of ", keys.size(),
                   " keys exceeds the limit of ", wire::kMaxKeysPerRequest);
  auto r = call(q, Millis(0));
  if (r.status != wire::Status::kOk) throw_status(q, r, Clock::now(), timeout());
  return r.number != 0;
}

void TcpStore::do_wait(const std::vector<std::string>& keys, Millis timeout) {
  auto start = Clock::now();
  COHORT_CHECK_ARG(keys.size() <= wire::kMaxKeysPerRequest, describe(), ": wait on ", keys.size(),
                   " keys exceeds the limit of ", wire::kMaxKeysPerRequest);
  wire::Request q;
  q.command = Command::kWait;
  q.keys = keys;
  q.timeout_ms = uint64_t(timeout.count());
  auto r = call(q, timeout);
  if (r.status != wire::Status::kOk) throw_status(q, r, start, timeout);
}

}  // namespace cohort::rendezvous
