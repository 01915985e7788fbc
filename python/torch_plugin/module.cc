// The extension module cohort.torch._c10d: the creator torch.distributed calls for
// init_process_group("cohort") / new_group(backend="cohort") (registered by
// python/cohort/torch/__init__.py), and what it needs to form a cohort world from torch's
// store: TorchStoreBridge and the job secret's exchange.
//
// Forming the world. torch hands the creator its store (torchrun's or `cohort run`'s TCPStore,
// under a PrefixStore per group), the rank, the size and the timeout. A cohort Communicator
// needs exactly that plus a secret for its TCP data connections: it publishes its listener's
// address through any rendezvous::Store, so the bridge below lets it bootstrap through torch's
// store with no second store or port.
//
// The secret. Under `cohort run` every rank already holds the job secret (COHORT_JOB_SECRET):
// rank 0 writes only "env" to the store and every rank uses its own copy, so the secret never
// crosses the network. Under torchrun there is none: rank 0 draws one and publishes it through
// torch's store. That store is unauthenticated, but it is already the job's root of trust:
// whoever can reach it can join the group or rewrite every address ranks exchange, so a secret
// carried there adds no exposure that the job does not already have (docs/python.md).
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <exception>

#include "cohort/core/error.h"
#include "cohort/net/secret.h"
#include "cohort/rendezvous/bootstrap.h"
#include "cohort/rendezvous/store.h"
#include "process_group_cohort.h"
#include "tensor_buffers.h"

namespace cohort::torch_plugin {
namespace {

using rendezvous::Bytes;
using rendezvous::Clock;
using rendezvous::Millis;

// cohort's rendezvous::Store over torch's c10d::Store.
class TorchStoreBridge : public rendezvous::Store {
 public:
  TorchStoreBridge(c10::intrusive_ptr<c10d::Store> store, rendezvous::StoreOptions options)
      : rendezvous::Store(options), store_(std::move(store)) {}
  std::string describe() const override { return "torch.distributed store"; }

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
  c10::intrusive_ptr<c10d::Store> store_;
};

// torch's stores throw c10::Error (or std::runtime_error) for a refused connection and for a
// wait past its deadline alike; cohort's callers tell the two apart by type (Timeout vs
// IoError), so classify by the clock.
[[noreturn]] void rethrow_store_error(const std::exception& e, std::string_view op,
                                      const std::vector<std::string>& keys, Clock::time_point start,
                                      Millis timeout) {
  if (Clock::now() - start >= timeout)
    rendezvous::throw_store_timeout("torch.distributed store", op, keys, start, timeout);
  throw IoError(detail::str("torch.distributed store: ", op, " of ", rendezvous::quote_keys(keys),
                            " failed: ", e.what()));
}

void TorchStoreBridge::do_set(const std::string& key, const Bytes& value) {
  try {
    store_->set(key, value);
  } catch (const std::exception& e) {
    throw IoError(detail::str("torch.distributed store: set of '", key, "' failed: ", e.what()));
  }
}

Bytes TorchStoreBridge::do_get(const std::string& key, Millis timeout) {
  do_wait({key}, timeout);  // torch's get() would use the store's own timeout, not ours
  try {
    return store_->get(key);
  } catch (const std::exception& e) {
    throw IoError(detail::str("torch.distributed store: get of '", key, "' failed: ", e.what()));
  }
}

int64_t TorchStoreBridge::do_add(const std::string& key, int64_t delta) {
  try {
    return store_->add(key, delta);
  } catch (const std::exception& e) {
    throw IoError(detail::str("torch.distributed store: add to '", key, "' failed: ", e.what()));
  }
}

Bytes TorchStoreBridge::do_compare_set(const std::string& key, const Bytes& expected,
                                       const Bytes& desired) {
  try {
    return store_->compareSet(key, expected, desired);
  } catch (const std::exception& e) {
    throw IoError(
        detail::str("torch.distributed store: compare_set of '", key, "' failed: ", e.what()));
  }
}

bool TorchStoreBridge::do_delete_key(const std::string& key) {
  try {
    return store_->deleteKey(key);
  } catch (const std::exception& e) {
    throw IoError(detail::str("torch.distributed store: delete of '", key, "' failed: ", e.what()));
  }
}

bool TorchStoreBridge::do_check(const std::vector<std::string>& keys) {
  try {
    return store_->check(keys);
  } catch (const std::exception& e) {
    throw IoError(detail::str("torch.distributed store: check of ", rendezvous::quote_keys(keys),
                              " failed: ", e.what()));
  }
}

void TorchStoreBridge::do_wait(const std::vector<std::string>& keys, Millis timeout) {
  const auto start = Clock::now();
  // torch reads a zero timeout as "wait forever"; cohort's deadlines are always positive.
  timeout = std::max(timeout, Millis{1});
  try {
    store_->wait(keys, timeout);
  } catch (const std::exception& e) {
    rethrow_store_error(e, "wait", keys, start, timeout);
  }
}

// The key rank 0 writes the secret's source under (in the group's own prefix of the store).
constexpr const char* kSecretKey = "cohort/secret";

// Every rank of the group ends with the same secret (see the top of this file).
net::Secret agree_secret(rendezvous::Store& store, int rank) {
  const rendezvous::EnvMap env = rendezvous::snapshot_environment();
  net::Secret mine = rendezvous::secret_from_env(env, net::SecretPolicy::kAllowInsecure);
  if (rank == 0) {
    if (!mine.empty()) {
      store.set_string(kSecretKey, "env");
      return mine;
    }
    net::Secret drawn = net::Secret::generate();
    store.set_string(kSecretKey, drawn.to_hex());
    return drawn;
  }
  const std::string source = store.get_string(kSecretKey);
  if (source != "env") return net::Secret::from_hex(source, "the torch.distributed store");
  COHORT_CHECK_ARG(!mine.empty(),
                   "rank 0 uses the job secret of its environment (COHORT_JOB_SECRET or "
                   "COHORT_JOB_SECRET_FILE) but rank ",
                   rank, " has none: start every rank with the same launcher");
  return mine;
}

constexpr size_t kDefaultInlineBytes = size_t{64} << 10;

std::string env_or(const rendezvous::EnvMap& env, const char* name, const std::string& fallback) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? fallback : it->second;
}

// COHORT_TORCH_INLINE_BYTES: collectives up to this size are held back until they are needed,
// so that the thread waiting for one runs it itself (ProcessGroupCohort, "Held operations");
// 0 turns that off.
size_t inline_max_bytes(const rendezvous::EnvMap& env) {
  const std::string text = env_or(env, "COHORT_TORCH_INLINE_BYTES", "");
  if (text.empty()) return kDefaultInlineBytes;
  size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  COHORT_CHECK_ARG(used == text.size() && text[0] != '-', "COHORT_TORCH_INLINE_BYTES='", text,
                   "': expected a number of bytes (0 turns running small collectives on the "
                   "calling thread off)");
  return size_t(value);
}

c10::intrusive_ptr<c10d::ProcessGroup> create_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "cohort backend: rank ", rank,
              " is not in a group of ", size);
  TORCH_CHECK(timeout.count() > 0, "cohort backend: the timeout must be positive");
  try {
    rendezvous::StoreOptions so;
    so.timeout = timeout;
    auto bridge = std::make_shared<TorchStoreBridge>(store, so);
    comm::CommOptions co;
    co.timeout = co.connect_timeout = timeout;
    co.prefix = "cohort";
    // Loopback unless told otherwise, as cohort's own comm.bind_address: a job across hosts
    // sets this host's address (or 0.0.0.0 and COHORT_ADVERTISE_ADDRESS).
    const rendezvous::EnvMap env = rendezvous::snapshot_environment();
    co.device.bind_address = env_or(env, "COHORT_BIND_ADDRESS", "127.0.0.1");
    co.device.advertise_address = env_or(env, "COHORT_ADVERTISE_ADDRESS", "");
    if (size > 1) co.device.secret = agree_secret(*bridge, rank);
    auto comm = comm::Communicator::create(bridge, rank, size, co);
    return c10::make_intrusive<ProcessGroupCohort>(std::move(comm), inline_max_bytes(env));
  } catch (const c10::Error&) {
    throw;
  } catch (const Error&) {  // keeps its type: cohort._core makes it cohort's Python exception
    rethrow_with_context(
        std::current_exception(),
        detail::str("cohort backend: rank ", rank, " of ", size, " could not join the group: "));
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "cohort backend: rank ", rank, " of ", size,
                " could not join the group: ", e.what());
  }
}

}  // namespace
}  // namespace cohort::torch_plugin

PYBIND11_MODULE(_c10d, m) {
  namespace py = pybind11;
  using cohort::torch_plugin::ProcessGroupCohort;
  m.doc() = "cohort's torch.distributed backend (import cohort.torch to register it)";
  // ProcessGroup's Python type must be registered before ours names it as a base.
  py::module_::import("torch.distributed");
  py::class_<ProcessGroupCohort, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupCohort>>(
      m, "ProcessGroupCohort")
      .def("transports", &ProcessGroupCohort::transports,
           "How this rank reaches each rank of the group: 'shm', 'tcp' or 'self'.");
  // For tests: the operand check every operation makes, reachable with any tensor (torch's
  // dispatcher stops meta tensors before a ProcessGroup sees them; Debian's torch has no CUDA).
  m.def("_check_operand", &cohort::torch_plugin::check_tensor, py::arg("tensor"), py::arg("op"));
  m.def("create_process_group", &cohort::torch_plugin::create_process_group, py::arg("store"),
        py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>(),
        "The creator torch.distributed.Backend.register_backend takes: forms a cohort "
        "Communicator over torch's store and returns it as a c10d ProcessGroup.");
}
