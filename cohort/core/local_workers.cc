#include "cohort/core/local_workers.h"

#include <charconv>
#include <cstdlib>

namespace cohort {
namespace {

// A decimal integer >= `min` filling the whole text, else nullopt.
std::optional<int> int_at_least(std::string_view text, int min) {
  int n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < min) return std::nullopt;
  return n;
}
std::optional<int> positive_int(std::string_view text) {
  return int_at_least(text, 1);
}

std::optional<int> positive_var(const EnvLookup& lookup, const char* name) {
  const char* v = lookup(name);
  if (!v) return std::nullopt;
  return positive_int(v);
}

}  // namespace

std::optional<int> slurm_tasks_on_node_or_none(std::string_view spec, int node_id) {
  // Comma-separated groups "N" or "N(xR)": R consecutive nodes running N tasks each.
  if (node_id < 0) return std::nullopt;
  int first_node = 0;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view group = spec.substr(pos, end - pos);
    size_t paren = group.find('(');
    std::optional<int> tasks = positive_int(group.substr(0, paren));
    std::optional<int> repeat = 1;
    if (paren != std::string_view::npos) {
      std::string_view rest = group.substr(paren);
      if (!rest.starts_with("(x") || !rest.ends_with(")")) return std::nullopt;
      repeat = positive_int(rest.substr(2, rest.size() - 3));
    }
    if (!tasks || !repeat) return std::nullopt;
    if (node_id < first_node + *repeat) return tasks;
    first_node += *repeat;
    pos = end + 1;
  }
  return std::nullopt;
}

int local_workers_from_env(const EnvLookup& lookup) {
  // The launcher's own count first: cohort's and torchrun's launchers set it for exactly the
  // processes they started, while MPI and SLURM variables may be inherited from an outer job.
  for (const char* name : {"COHORT_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE",
                           "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    if (std::optional<int> n = positive_var(lookup, name)) return *n;
  }
  if (const char* spec = lookup("SLURM_STEP_TASKS_PER_NODE")) {
    const char* node = lookup("SLURM_NODEID");
    std::optional<int> node_id = node ? int_at_least(node, 0) : 0;
    if (node_id) {
      if (std::optional<int> n = slurm_tasks_on_node_or_none(spec, *node_id)) return *n;
    }
  }
  return positive_var(lookup, "SLURM_NTASKS_PER_NODE").value_or(1);
}

int local_workers_from_env() {
  return local_workers_from_env([](const char* name) { return std::getenv(name); });
}

}  // namespace cohort
