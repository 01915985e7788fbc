#include "cohort/rendezvous/bootstrap.h"

#include <unistd.h>  // environ (declared with _GNU_SOURCE, which g++ defines)

#include <charconv>
#include <optional>
#include <vector>

#include "cohort/core/error.h"
#include "cohort/core/local_workers.h"

namespace cohort::rendezvous {
namespace {

// The variable names of one convention. Empty names are not provided by the convention.
struct Names {
  EnvConvention convention;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

constexpr Names kConventions[] = {
    {EnvConvention::kCohort, "COHORT_RANK", "COHORT_WORLD_SIZE", "COHORT_LOCAL_RANK",
     "COHORT_LOCAL_WORLD_SIZE"},
    {EnvConvention::kTorchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {EnvConvention::kOpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {EnvConvention::kSlurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", ""},
};

const std::string* lookup(const EnvMap& env, std::string_view name) {
  if (name.empty()) return nullptr;
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// Reads the variables of one convention, collecting every missing one into one message.
class Reader {
 public:
  Reader(const EnvMap& env, EnvConvention c) : env_(env), convention_(c) {}

  std::optional<int64_t> integer(const char* name, int64_t min, int64_t max) {
    const std::string* v = lookup(env_, name);
    if (!v) {
      missing_.push_back(name);
      return std::nullopt;
    }
    int64_t out = 0;
    auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
    COHORT_CHECK_ARG(ec == std::errc() && ptr == v->data() + v->size() && !v->empty(),
                     convention_name(convention_), " environment: ", name, "='", *v,
                     "' is not an integer");
    COHORT_CHECK_ARG(out >= min && out <= max, convention_name(convention_), " environment: ", name,
                     "=", out, " is outside ", min, "..", max);
    return out;
  }
  std::optional<std::string> text(const char* name) {
    const std::string* v = lookup(env_, name);
    if (!v || v->empty()) {
      missing_.push_back(name);
      return std::nullopt;
    }
    return *v;
  }
  void note_missing(std::string what) { missing_.push_back(std::move(what)); }
  // Throws if anything required was missing.
  void finish() const {
    if (missing_.empty()) return;
    std::string names;
    for (const auto& m : missing_) names += (names.empty() ? "" : ", ") + m;
    throw InvalidArgument(
        detail::str(convention_name(convention_), " environment is incomplete: missing ", names));
  }

 private:
  const EnvMap& env_;
  EnvConvention convention_;
  std::vector<std::string> missing_;
};

const Names* detect(const EnvMap& env) {
  for (const Names& n : kConventions)
    if (lookup(env, n.rank) || lookup(env, n.world_size)) return &n;
  return nullptr;
}

// Open MPI and SLURM do not say where the store is: take cohort's pair, else torchrun's.
void read_master(const EnvMap& env, EnvConvention c, Reader& r, WorldInfo* w) {
  const char* addr = "COHORT_MASTER_ADDR";
  const char* port = "COHORT_MASTER_PORT";
  if (c == EnvConvention::kTorchrun) {
    addr = "MASTER_ADDR";
    port = "MASTER_PORT";
  } else if (c != EnvConvention::kCohort && !(lookup(env, addr) && lookup(env, port))) {
    if (!(lookup(env, "MASTER_ADDR") && lookup(env, "MASTER_PORT"))) {
      r.note_missing("COHORT_MASTER_ADDR and COHORT_MASTER_PORT (or MASTER_ADDR and MASTER_PORT)");
      return;
    }
    addr = "MASTER_ADDR";
    port = "MASTER_PORT";
  }
  w->master_addr = r.text(addr).value_or("");
  w->master_port = uint16_t(r.integer(port, 1, 65535).value_or(0));
}

void read_slurm_local_size(const EnvMap& env, Reader& r, WorldInfo* w) {
  if (lookup(env, "SLURM_NTASKS_PER_NODE")) {
    w->local_world_size = int(r.integer("SLURM_NTASKS_PER_NODE", 1, INT32_MAX).value_or(1));
    return;
  }
  const std::string* per_node = lookup(env, "SLURM_TASKS_PER_NODE");
  const std::string* node = lookup(env, "SLURM_NODEID");
  if (!per_node || !node) {
    r.note_missing("SLURM_NTASKS_PER_NODE (or SLURM_TASKS_PER_NODE with SLURM_NODEID)");
    return;
  }
  int node_id = int(r.integer("SLURM_NODEID", 0, INT32_MAX).value_or(0));
  w->local_world_size = slurm_tasks_on_node(*per_node, node_id);
}

void check_consistent(const Names& n, const WorldInfo& w) {
  const char* conv = convention_name(n.convention);
  const char* local_size = n.local_world_size[0] ? n.local_world_size : "local world size";
  COHORT_CHECK_ARG(w.rank < w.world_size, conv, " environment: ", n.rank, "=", w.rank,
                   " is not below ", n.world_size, "=", w.world_size);
  COHORT_CHECK_ARG(w.local_world_size <= w.world_size, conv, " environment: ", local_size, "=",
                   w.local_world_size, " exceeds ", n.world_size, "=", w.world_size);
  COHORT_CHECK_ARG(w.local_rank < w.local_world_size, conv, " environment: ", n.local_rank, "=",
                   w.local_rank, " is not below ", local_size, "=", w.local_world_size);
  COHORT_CHECK_ARG(w.local_rank <= w.rank, conv, " environment: ", n.local_rank, "=", w.local_rank,
                   " exceeds ", n.rank, "=", w.rank);
}

}  // namespace

int int_from_env(const EnvMap& env, std::string_view name, int fallback) {
  const std::string* v = lookup(env, name);
  if (!v) return fallback;
  int out = 0;
  auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  COHORT_CHECK_ARG(ec == std::errc() && ptr == v->data() + v->size() && !v->empty(),
                   "environment: ", name, "='", *v, "' is not an integer");
  return out;
}

const char* convention_name(EnvConvention c) {
  switch (c) {
    case EnvConvention::kCohort:
      return "cohort";
    case EnvConvention::kTorchrun:
      return "torchrun";
    case EnvConvention::kOpenMpi:
      return "Open MPI";
    case EnvConvention::kSlurm:
      return "SLURM";
  }
  return "unknown";
}

EnvMap snapshot_environment() {
  EnvMap env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string_view::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

net::Secret secret_from_env(const EnvMap& env, net::SecretPolicy policy) {
  const std::string* hex = lookup(env, "COHORT_JOB_SECRET");
  const std::string* file = lookup(env, "COHORT_JOB_SECRET_FILE");
  COHORT_CHECK_ARG(!(hex && file),
                   "both COHORT_JOB_SECRET and COHORT_JOB_SECRET_FILE are set; "
                   "set only one");
  if (hex) return net::Secret::from_hex(*hex, "COHORT_JOB_SECRET");
  if (file) return net::Secret::from_file(*file);
  const std::string* insecure = lookup(env, "COHORT_ALLOW_INSECURE");
  if (insecure && *insecure == "1") policy = net::SecretPolicy::kAllowInsecure;
  net::Secret none;
  net::check_secret(none, policy, "rendezvous");
  return none;
}

bool has_launcher_environment(const EnvMap& env) {
  return detect(env) != nullptr;
}

WorldInfo world_from_env(const EnvMap& env, const BootstrapOptions& options) {
  const Names* n = detect(env);
  COHORT_CHECK_ARG(n,
                   "no launcher environment found: expected COHORT_RANK/COHORT_WORLD_SIZE "
                   "(cohort run), RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK (mpirun) "
                   "or SLURM_PROCID (srun)");
  WorldInfo w;
  w.source = n->convention;
  Reader r(env, n->convention);
  w.world_size = int(r.integer(n->world_size, 1, INT32_MAX).value_or(1));
  w.rank = int(r.integer(n->rank, 0, INT32_MAX).value_or(0));
  w.local_rank = int(r.integer(n->local_rank, 0, INT32_MAX).value_or(0));
  if (n->convention == EnvConvention::kSlurm)
    read_slurm_local_size(env, r, &w);
  else
    w.local_world_size = int(r.integer(n->local_world_size, 1, INT32_MAX).value_or(1));
  read_master(env, n->convention, r, &w);
  r.finish();
  check_consistent(*n, w);
  w.secret = secret_from_env(env, options.secret_policy);
  COHORT_CHECK_ARG(!w.secret.empty() || net::is_loopback_host(w.master_addr),
                   "insecure mode (no job secret) is for single-host tests: the store address ",
                   w.master_addr, " is not loopback. Set COHORT_JOB_SECRET");
  return w;
}

int slurm_tasks_on_node(const std::string& spec, int node_id) {
  // One parser of SLURM's "2(x3),1" for the world and the thread default (core/local_workers.h).
  std::optional<int> tasks = slurm_tasks_on_node_or_none(spec, node_id);
  COHORT_CHECK_ARG(tasks.has_value(), "SLURM environment: SLURM_TASKS_PER_NODE='", spec,
                   "' is not a list like 2(x3),1 with an entry for SLURM_NODEID=", node_id);
  return *tasks;
}

}  // namespace cohort::rendezvous
