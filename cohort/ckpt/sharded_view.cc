// ShardedView: validates a checkpoint's shard index against its shard files, then reads tensors
// by element range across pieces. The write side is sharded.cc.
#include <algorithm>
#include <cstring>
#include <set>

#include "cohort/ckpt/manifest.h"
#include "cohort/ckpt/sharded.h"

namespace cohort::ckpt {
namespace {
using internal::ViewEntry;
using internal::ViewPiece;
using nlohmann::json;

std::string where(const ViewPiece& p, int world) {
  return p.shard < 0 ? std::string("the whole-tensor file") : internal::shard_file(p.shard, world);
}

std::string key_of(const std::string& section, const std::string& name) {
  return section + "/" + name;
}

// What the errors about the index call it: the index lives in state.json.
constexpr char kIndex[] = "checkpoint shard index (state.json \"shards\")";

bool is_count(const json& j) {
  return j.is_number_integer() && j.get<int64_t>() >= 0;
}

DType parse_dtype(const json& j, const std::string& tensor) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (j.is_string() && j.get<std::string>() == safetensors_dtype(DType(i))) return DType(i);
  throw IoError(detail::str("checkpoint shard index: tensor ", tensor, " has dtype ", j.dump(),
                            ", expected a safetensors dtype (F32, F64, F16, BF16, I32, I64, U8)"));
}

// One "tensors" entry of the index, with its pieces' data not yet attached.
ViewEntry parse_entry(const json& t, int world) {
  const std::string ctx = kIndex;
  COHORT_CHECK_IO(t.is_object() && t.contains("section") && t["section"].is_string() &&
                      t.contains("name") && t["name"].is_string(),
                  ctx, ": an entry has no string \"section\" and \"name\": ", t.dump());
  ViewEntry e{t["section"].get<std::string>(), t["name"].get<std::string>()};
  const std::string tensor = key_of(e.section, e.name);
  COHORT_CHECK_IO(internal::is_section(e.section) && !e.name.empty(), ctx, ": tensor ", tensor,
                  ": section must be model or optimizer and the name non-empty");
  uint64_t numel = 0;
  e.shape = internal::parse_shape(detail::str(ctx, ": tensor ", tensor), t.value("shape", json()),
                                  &numel);
  e.dtype = parse_dtype(t.value("dtype", json()), tensor);
  COHORT_CHECK_IO(t.contains("pieces") && t["pieces"].is_array(), ctx, ": tensor ", tensor,
                  ": no \"pieces\" array");
  for (const json& p : t["pieces"]) {
    COHORT_CHECK_IO(p.is_object() && p.contains("shard") && p["shard"].is_number_integer() &&
                        is_count(p.value("begin", json())) && is_count(p.value("numel", json())),
                    ctx, ": tensor ", tensor,
                    ": a piece needs integer shard, begin, numel: ", p.dump());
    const int64_t shard = p["shard"].get<int64_t>();
    COHORT_CHECK_IO(shard >= 0 && shard < world, ctx, ": tensor ", tensor, ": a piece is on shard ",
                    shard, " of a world of ", world);
    e.pieces.push_back({int(shard), p["begin"].get<int64_t>(), p["numel"].get<int64_t>()});
  }
  return e;
}

// Every element in exactly one piece, none past the end. Sorts the pieces by begin.
void check_coverage(ViewEntry& e, int world) {
  const std::string tensor = key_of(e.section, e.name);
  const int64_t total = shape_numel(e.shape);
  std::sort(e.pieces.begin(), e.pieces.end(), [](const ViewPiece& a, const ViewPiece& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.numel < b.numel;
  });
  int64_t covered = 0;
  const ViewPiece* prev = nullptr;
  for (const ViewPiece& p : e.pieces) {
    // Compared without forming begin + numel, which a damaged index can overflow.
    COHORT_CHECK_IO(p.begin <= total && p.numel <= total - p.begin, kIndex, ": tensor ", tensor,
                    ": the piece of ", p.numel, " elements at ", p.begin, " in ", where(p, world),
                    " is past the end of its ", total, " elements (shape ", shape_str(e.shape),
                    ")");
    const int64_t end = p.begin + p.numel;
    if (p.numel == 0) continue;
    COHORT_CHECK_IO(p.begin <= covered, "checkpoint: tensor ", tensor, ": elements [", covered,
                    ", ", p.begin, ") are in no shard (a hole before the piece at ", p.begin,
                    " in ", where(p, world), ")");
    COHORT_CHECK_IO(p.begin >= covered, "checkpoint: tensor ", tensor, ": pieces overlap: [",
                    prev->begin, ", ", covered, ") in ", where(*prev, world), " and [", p.begin,
                    ", ", end, ") in ", where(p, world));
    covered = end;
    prev = &p;
  }
  COHORT_CHECK_IO(covered == total, "checkpoint: tensor ", tensor, ": elements [", covered, ", ",
                  total, ") are in no shard (a hole ",
                  prev ? "after the piece in " + where(*prev, world) : std::string("; no pieces"),
                  ")");
}

// Shard files by rank: exactly shard-<r>-of-<world> for every r when the checkpoint has an
// index, none when it has not.
std::vector<const NamedTensors*> shard_files(const CheckpointData& d, bool indexed, int world) {
  std::vector<const NamedTensors*> files(indexed ? size_t(world) : 0, nullptr);
  for (const auto& [name, tensors] : d.extra) {
    const auto rn = internal::parse_shard_file_name(name);
    if (!rn) continue;
    const bool listed = indexed && rn->second == world && rn->first >= 0 && rn->first < world &&
                        name == shard_file_name(rn->first, world);
    COHORT_CHECK_IO(listed, "checkpoint: shard file ", name, internal::kTensorFileSuffix,
                    " is not listed in the index",
                    indexed ? detail::str(" (state.json \"shards\" is for world ", world, ")")
                            : std::string(" (state.json has no \"shards\")"));
    files[size_t(rn->first)] = &tensors;
  }
  return files;
}

}  // namespace

ShardedView::ShardedView(const CheckpointData& d) {
  const bool indexed = d.state.is_object() && d.state.contains(kShardsKey);
  if (indexed) parse_index(d.state[kShardsKey]);
  for (ViewEntry& e : entries_) check_coverage(e, world_);
  attach_pieces(d, indexed);
  add_whole("model", d.model);
  add_whole("optimizer", d.optimizer);
}

void ShardedView::parse_index(const json& index) {
  COHORT_CHECK_IO(index.is_object() && index.contains("world") &&
                      index["world"].is_number_integer() && index["world"].get<int64_t>() >= 1 &&
                      index["world"].get<int64_t>() <= kMaxShardWorld &&
                      index.contains("tensors") && index["tensors"].is_array(),
                  "checkpoint shard index (state.json \"shards\"): expected {\"world\": N (1 to ",
                  kMaxShardWorld, "), \"tensors\": [...]}, got ", index.dump().substr(0, 200));
  world_ = index["world"].get<int>();
  for (const json& t : index["tensors"]) {
    ViewEntry e = parse_entry(t, world_);
    const std::string key = key_of(e.section, e.name);
    COHORT_CHECK_IO(by_key_.emplace(key, entries_.size()).second, "checkpoint shard index: tensor ",
                    key, " is listed twice");
    entries_.push_back(std::move(e));
  }
}

void ShardedView::attach_pieces(const CheckpointData& d, bool indexed) {
  const std::vector<const NamedTensors*> files = shard_files(d, indexed, world_);
  for (size_t r = 0; r < files.size(); ++r) {
    if (files[r]) continue;
    std::string user;  // a tensor with a piece there, to say what is lost
    for (const ViewEntry& e : entries_)
      for (const ViewPiece& p : e.pieces)
        if (user.empty() && p.shard == int(r)) user = key_of(e.section, e.name);
    throw IoError(detail::str("checkpoint: shard file ", internal::shard_file(int(r), world_),
                              " is missing (the index lists world ", world_, ")",
                              user.empty() ? "" : "; it holds a piece of tensor " + user));
  }
  std::vector<std::map<std::string, Tensor>> held(files.size());
  for (size_t r = 0; r < files.size(); ++r)
    for (const auto& [key, t] : *files[r]) held[r][key] = t;
  for (ViewEntry& e : entries_) {
    for (ViewPiece& p : e.pieces) {
      const std::string key = internal::piece_key(e.section, e.name, p.begin);
      auto& file = held[size_t(p.shard)];
      auto it = file.find(key);
      COHORT_CHECK_IO(it != file.end(), "checkpoint: tensor ", key_of(e.section, e.name),
                      ": piece '", key, "' is in the index but missing from ",
                      internal::shard_file(p.shard, world_));
      const Tensor& t = it->second;
      COHORT_CHECK_IO(t.dtype() == e.dtype && t.dim() == 1 && t.numel() == p.numel,
                      "checkpoint: tensor ", key_of(e.section, e.name), ": piece '", key, "' in ",
                      internal::shard_file(p.shard, world_), " is ", safetensors_dtype(t.dtype()),
                      " ", shape_str(t.shape()), ", the index says ", safetensors_dtype(e.dtype),
                      " [", p.numel, "]");
      p.data = t.contiguous_raw();
      file.erase(it);  // what stays is not in the index
    }
  }
  for (size_t r = 0; r < held.size(); ++r)
    COHORT_CHECK_IO(held[r].empty(), "checkpoint: ", internal::shard_file(int(r), world_),
                    " holds '", held[r].empty() ? "" : held[r].begin()->first,
                    "', which the index in state.json does not list");
}

void ShardedView::add_whole(const std::string& section, const NamedTensors& tensors) {
  for (const auto& [name, t] : tensors) {
    const std::string key = key_of(section, name);
    auto [it, fresh] = by_key_.emplace(key, entries_.size());
    if (!fresh) {
      const ViewEntry& e = entries_[it->second];
      const bool whole = !e.pieces.empty() && e.pieces[0].shard < 0;
      COHORT_CHECK_IO(whole, "checkpoint: tensor ", key, " is both whole in ", section,
                      ".safetensors and in pieces in ",
                      e.pieces.empty() ? std::string("the shard index")
                                       : internal::shard_file(e.pieces[0].shard, world_));
      throw IoError(
          detail::str("checkpoint: tensor ", key, " is twice in ", section, ".safetensors"));
    }
    // as_strided, not reshape: ckpt/ links tensor/ only (reshape lives in ops/).
    const Tensor c = t.contiguous_raw();
    const Tensor flat = c.as_strided({c.numel()}, {1}, c.offset());
    entries_.push_back({section, name, t.shape(), t.dtype(), {{-1, 0, t.numel(), flat}}});
  }
}

const ViewEntry& ShardedView::entry(const std::string& section, const std::string& name) const {
  auto it = by_key_.find(key_of(section, name));
  COHORT_CHECK_ARG(it != by_key_.end(), "checkpoint has no tensor ", name, " in ", section);
  return entries_[it->second];
}

std::vector<std::string> ShardedView::names(const std::string& section) const {
  std::vector<std::string> out;
  for (const ViewEntry& e : entries_)
    if (e.section == section) out.push_back(e.name);
  return out;
}

bool ShardedView::has(const std::string& section, const std::string& name) const {
  return by_key_.count(key_of(section, name)) > 0;
}

const Shape& ShardedView::shape(const std::string& section, const std::string& name) const {
  return entry(section, name).shape;
}

DType ShardedView::dtype(const std::string& section, const std::string& name) const {
  return entry(section, name).dtype;
}

Tensor ShardedView::read(const std::string& section, const std::string& name, int64_t begin,
                         int64_t end) const {
  const ViewEntry& e = entry(section, name);
  const int64_t total = shape_numel(e.shape);
  COHORT_CHECK_ARG(0 <= begin && begin <= end && end <= total, "read of tensor ", section, "/",
                   name, ": range [", begin, ", ", end, ") is outside its ", total, " elements");
  Tensor out = empty({end - begin}, e.dtype);
  const size_t item = dtype_size(e.dtype);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (const ViewPiece& p : e.pieces) {
    const int64_t lo = std::max(begin, p.begin), hi = std::min(end, p.begin + p.numel);
    if (lo >= hi) continue;
    const auto* src = static_cast<const uint8_t*>(p.data.raw_data());
    std::memcpy(dst + size_t(lo - begin) * item, src + size_t(lo - p.begin) * item,
                size_t(hi - lo) * item);
  }
  return out;
}

Tensor ShardedView::full(const std::string& section, const std::string& name) const {
  const ViewEntry& e = entry(section, name);
  return read(section, name, 0, shape_numel(e.shape))
      .as_strided(e.shape, contiguous_strides(e.shape), 0);
}

std::vector<TensorPiece> ShardedView::pieces(const std::string& section,
                                             const std::string& name) const {
  const ViewEntry& e = entry(section, name);
  std::vector<TensorPiece> out;
  for (const ViewPiece& p : e.pieces)
    out.push_back({section, name, e.shape, p.begin, p.data, p.shard});
  return out;
}

}  // namespace cohort::ckpt
