// Sharded checkpoints: the write side (add_shards) and reshard. The reader is sharded_view.cc.
#include "cohort/ckpt/sharded.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "cohort/ckpt/flat_layout.h"
#include "cohort/ckpt/manifest.h"

namespace cohort::ckpt {
namespace {
using nlohmann::json;

// Arguments a piece must satisfy before it can be indexed (the rest, coverage and overlap, is
// the view's check of the finished index).
void check_piece(const TensorPiece& p, int rank, int world) {
  const std::string where = detail::str("add_shards: piece of tensor ", p.section, "/", p.name,
                                        " for ", internal::shard_file(rank, world));
  COHORT_CHECK_ARG(internal::is_section(p.section), where, ": section '", p.section,
                   "' is not model or optimizer");
  COHORT_CHECK_ARG(!p.name.empty(), where, ": empty tensor name");
  COHORT_CHECK_ARG(p.data.defined(), where, ": data is undefined");
  COHORT_CHECK_ARG(p.data.dim() == 1, where, ": data must be 1-D, got shape ",
                   shape_str(p.data.shape()));
  COHORT_CHECK_ARG(p.begin >= 0, where, ": begin is ", p.begin);
}

// The index entries, in order of first appearance (rank by rank: the flat layout's order).
struct IndexBuilder {
  json tensors = json::array();
  std::map<std::string, size_t> slot;  // "<section>/<name>" -> position in tensors

  void add(const TensorPiece& p, int rank, int world) {
    const std::string key = p.section + "/" + p.name;
    auto [it, fresh] = slot.emplace(key, tensors.size());
    if (fresh) {
      tensors.push_back({{"section", p.section},
                         {"name", p.name},
                         {"shape", p.global_shape},
                         {"dtype", safetensors_dtype(p.data.dtype())},
                         {"pieces", json::array()}});
    }
    json& t = tensors[it->second];
    COHORT_CHECK_ARG(t["shape"].get<Shape>() == p.global_shape, "add_shards: tensor ", key,
                     " has global shape ", shape_str(t["shape"].get<Shape>()), " in one piece and ",
                     shape_str(p.global_shape), " in ", internal::shard_file(rank, world));
    COHORT_CHECK_ARG(t["dtype"] == safetensors_dtype(p.data.dtype()), "add_shards: tensor ", key,
                     " is ", t["dtype"].get<std::string>(), " in one piece and ",
                     safetensors_dtype(p.data.dtype()), " in ", internal::shard_file(rank, world));
    t["pieces"].push_back({{"shard", rank}, {"begin", p.begin}, {"numel", p.data.numel()}});
  }
};

}  // namespace

namespace internal {

std::string piece_key(const std::string& section, const std::string& name, int64_t begin) {
  return section + "/" + name + "@" + std::to_string(begin);
}

std::optional<std::pair<int, int>> parse_shard_file_name(const std::string& name) {
  // shard-<digits>-of-<digits>
  const std::string head = "shard-", mid = "-of-";
  if (name.rfind(head, 0) != 0) return {};
  const size_t m = name.find(mid, head.size());
  if (m == std::string::npos) return {};
  auto number = [](const char* b, const char* e) -> std::optional<int> {
    int v = 0;
    auto [p, ec] = std::from_chars(b, e, v);
    if (b == e || *b == '-' || *b == '+' || ec != std::errc() || p != e) return {};
    return v;
  };
  auto r = number(name.data() + head.size(), name.data() + m);
  auto n = number(name.data() + m + mid.size(), name.data() + name.size());
  if (!r || !n) return {};
  return std::make_pair(*r, *n);
}

bool is_section(const std::string& section) {
  return section == "model" || section == "optimizer";
}

}  // namespace internal

std::string internal::shard_file(int rank, int world) {
  return shard_file_name(rank, world) + kTensorFileSuffix;
}

std::string shard_file_name(int rank, int world) {
  COHORT_CHECK_ARG(world >= 1 && rank >= 0 && rank < world, "shard_file_name: rank ", rank,
                   " of world ", world);
  char buf[48];
  std::snprintf(buf, sizeof buf, "shard-%05d-of-%05d", rank, world);
  return buf;
}

void add_shards(CheckpointData& d, int world,
                const std::vector<std::vector<TensorPiece>>& pieces_by_rank) {
  COHORT_CHECK_ARG(world >= 1, "add_shards: world is ", world, ", expected >= 1");
  COHORT_CHECK_ARG(pieces_by_rank.size() == size_t(world), "add_shards: world is ", world,
                   " but pieces are given for ", pieces_by_rank.size(), " ranks");
  COHORT_CHECK_ARG(d.state.is_object() || d.state.is_null(),
                   "add_shards: checkpoint state must be a JSON object, got ", d.state.type_name());
  CheckpointData out = d;  // tensor handles only; `d` changes only once `out` checks out
  for (auto it = out.extra.begin(); it != out.extra.end();)
    it = internal::parse_shard_file_name(it->first) ? out.extra.erase(it) : std::next(it);
  IndexBuilder index;
  for (int r = 0; r < world; ++r) {
    NamedTensors file;
    std::set<std::string> keys;
    for (const TensorPiece& p : pieces_by_rank[size_t(r)]) {
      check_piece(p, r, world);
      const std::string key = internal::piece_key(p.section, p.name, p.begin);
      COHORT_CHECK_ARG(keys.insert(key).second, "add_shards: two pieces '", key, "' for ",
                       internal::shard_file(r, world));
      index.add(p, r, world);
      file.emplace_back(key, p.data);
    }
    out.extra[shard_file_name(r, world)] = std::move(file);
  }
  out.state[kShardsKey] = {{"world", world}, {"tensors", std::move(index.tensors)}};
  try {
    ShardedView check(out);
  } catch (const IoError& e) {
    throw InvalidArgument(detail::str("add_shards: ", e.what()));
  }
  d = std::move(out);
}

namespace {

// Rank r's pieces of one section laid out over `world` shards, in tensor order. A tensor with
// no elements goes to the rank whose shard holds its offset, so that it is still recorded.
void cut_section(const ShardedView& view, const std::string& section, int world,
                 std::vector<std::vector<TensorPiece>>& by_rank) {
  const std::vector<std::string> names = view.names(section);
  std::vector<int64_t> numels;
  for (const std::string& n : names) numels.push_back(shape_numel(view.shape(section, n)));
  const FlatLayout layout(numels, world);
  for (int r = 0; r < world; ++r) {
    const std::vector<FlatPiece> cut = layout.pieces_of_shard(r);
    size_t next = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      TensorPiece p{section, names[i], view.shape(section, names[i])};
      if (numels[i] == 0) {
        if (layout.owner(layout.offset(i)) != r) continue;
        p.data = view.read(section, names[i], 0, 0);
      } else if (next < cut.size() && cut[next].index == i) {
        p.begin = cut[next].begin;
        p.data = view.read(section, names[i], cut[next].begin, cut[next].end);
        ++next;
      } else {
        continue;
      }
      by_rank[size_t(r)].push_back(std::move(p));
    }
  }
}

}  // namespace

CheckpointData reshard(const CheckpointData& src, int world) {
  COHORT_CHECK_ARG(world >= 1 && world <= kMaxShardWorld, "reshard: world is ", world,
                   ", expected 1 to ", kMaxShardWorld);
  const ShardedView view(src);
  CheckpointData out;
  out.step = src.step;
  out.state = src.state;
  if (out.state.is_object()) out.state.erase(kShardsKey);
  for (const auto& [name, tensors] : src.extra)
    if (!internal::parse_shard_file_name(name)) out.extra[name] = tensors;
  if (world == 1) {
    for (const std::string& n : view.names("model"))
      out.model.emplace_back(n, view.full("model", n));
    for (const std::string& n : view.names("optimizer"))
      out.optimizer.emplace_back(n, view.full("optimizer", n));
    return out;
  }
  std::vector<std::vector<TensorPiece>> by_rank(static_cast<size_t>(world));
  for (const char* section : {"model", "optimizer"}) cut_section(view, section, world, by_rank);
  add_shards(out, world, by_rank);
  return out;
}

}  // namespace cohort::ckpt
