#include "cohort/ps/partition.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "cohort/ckpt/flat_layout.h"
#include "cohort/core/error.h"

namespace cohort::ps {

Layout layout_of(const NamedTensors& params) {
  Layout l;
  std::set<const void*> seen;  // tied weights: the same storage under a second name
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, t] = params[i];
    COHORT_CHECK_ARG(t.dtype() == DType::f32 && t.is_contiguous(), "parameter server: '", name,
                     "' is not a contiguous f32 tensor");
    if (!seen.insert(t.raw_data()).second) continue;
    l.params.push_back({name, t.numel(), l.total, i});
    l.total += t.numel();
  }
  return l;
}

std::vector<KeyRange> partition_keys(int64_t total, int num_servers) {
  COHORT_CHECK_ARG(num_servers >= 1, "parameter server: need at least one server, got ",
                   num_servers);
  COHORT_CHECK_ARG(num_servers <= total, "parameter server: ", num_servers,
                   " servers for a model of ", total,
                   " parameters would leave a server without keys; use fewer servers");
  std::vector<KeyRange> out;
  for (int i = 0; i < num_servers; ++i) {
    const ckpt::FlatRange r = ckpt::shard_range(total, num_servers, i, ckpt::ShardRule::kBalanced);
    out.push_back({r.begin, r.end});
  }
  return out;
}

std::string first_difference(const Layout& mine, const Layout& theirs,
                             const std::string& mine_label, const std::string& theirs_label) {
  const size_t n = std::max(mine.params.size(), theirs.params.size());
  auto describe = [](const Layout& l, size_t i) {
    if (i >= l.params.size()) return std::string("no parameter");
    return detail::str("'", l.params[i].name, "' (", l.params[i].numel, " elements)");
  };
  for (size_t i = 0; i < n; ++i) {
    bool same = i < mine.params.size() && i < theirs.params.size() &&
                mine.params[i].name == theirs.params[i].name &&
                mine.params[i].numel == theirs.params[i].numel;
    if (same) continue;
    return detail::str("parameter ", i, ": ", mine_label, " has ", describe(mine, i), ", ",
                       theirs_label, " has ", describe(theirs, i));
  }
  return "";
}

namespace {

// Calls f(tensor, first element of the tensor, first key in `range`, count) for each part of a
// parameter that falls in range.
template <typename F>
void for_each_overlap(const NamedTensors& params, const Layout& layout, KeyRange range, F f) {
  for (const ParamSlot& p : layout.params) {
    const auto piece = ckpt::piece_of(p.index, p.offset, p.numel, {range.begin, range.end});
    if (!piece) continue;
    f(params.at(p.index).second, piece->begin, piece->flat_begin - range.begin, piece->size());
  }
}

}  // namespace

void gather_values(const NamedTensors& params, const Layout& layout, KeyRange range, float* flat) {
  for_each_overlap(params, layout, range, [&](const Tensor& t, int64_t at, int64_t to, int64_t n) {
    std::memcpy(flat + to, t.data<float>() + at, size_t(n) * sizeof(float));
  });
}

void gather_grads(const NamedTensors& params, const Layout& layout, KeyRange range, float* flat) {
  for_each_overlap(params, layout, range, [&](const Tensor& t, int64_t at, int64_t to, int64_t n) {
    Tensor g = t.grad();
    if (!g.defined()) {
      std::fill_n(flat + to, n, 0.0f);
      return;
    }
    if (!g.is_contiguous() || g.dtype() != DType::f32) g = g.contiguous_raw();
    std::memcpy(flat + to, g.data<float>() + at, size_t(n) * sizeof(float));
  });
}

void scatter_values(const NamedTensors& params, const Layout& layout, KeyRange range,
                    const float* flat) {
  for_each_overlap(params, layout, range, [&](const Tensor& t, int64_t at, int64_t to, int64_t n) {
    std::memcpy(t.data<float>() + at, flat + to, size_t(n) * sizeof(float));
  });
}

}  // namespace cohort::ps
