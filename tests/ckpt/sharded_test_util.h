#pragma once
// Shared by the sharded checkpoint tests: a small model and optimizer with uneven tensor sizes,
// cut into pieces the way a ZeRO writer would (FlatLayout per section), and the index entry of
// one tensor for tests that corrupt it.
#include <string>
#include <vector>

#include "cohort/ckpt/flat_layout.h"
#include "cohort/ckpt/sharded.h"
#include "tests/ckpt/ckpt_test_util.h"

namespace cohort::ckpt::testing {

// Sizes 7, 1, 0, 13 and a 2-D [3, 5] (uneven on every world 2..4), f32 and one i64 0-d.
inline CheckpointData whole_checkpoint() {
  CheckpointData d;
  d.step = 42;
  d.model = {{"a", randn({7}, 1)},
             {"b", randn({1}, 2)},
             {"e", empty({0})},
             {"c", randn({13}, 3)},
             {"w", randn({3, 5}, 4)}};
  Tensor count = empty({}, DType::i64);
  *count.data<int64_t>() = 1234567;
  d.optimizer = {{"a.exp_avg", randn({7}, 5)}, {"w.exp_avg", randn({3, 5}, 6)}, {"step", count}};
  d.state = {{"step", 42}, {"world_size", 4}};
  return d;
}

// Elements [b, e) of t's row-major flattening, as a new 1-D tensor (the ckpt tests link
// tensor/ only, without the ops/ views).
inline Tensor flat_slice(const Tensor& t, int64_t b, int64_t e) {
  const Tensor c = t.contiguous_raw();
  return c.as_strided({e - b}, {1}, c.offset() + b).contiguous_raw();
}

// Each rank's pieces of `tensors` laid out flat over `world` ranks; an empty tensor goes to
// rank 0 as an empty piece (so that it is recorded). Written against FlatLayout directly, not
// through reshard(), so that the two check each other.
inline void cut(const std::string& section, const NamedTensors& tensors, int world,
                std::vector<std::vector<TensorPiece>>& by_rank) {
  std::vector<int64_t> numels;
  for (const auto& [name, t] : tensors) numels.push_back(t.numel());
  const FlatLayout layout(numels, world);
  for (int r = 0; r < world; ++r) {
    const std::vector<FlatPiece> pieces = layout.pieces_of_shard(r);
    for (size_t i = 0; i < tensors.size(); ++i) {  // tensor order, so the index keeps it
      const auto& [name, t] = tensors[i];
      if (t.numel() == 0 && r == 0)
        by_rank[0].push_back({section, name, t.shape(), 0, empty({0}, t.dtype())});
      for (const FlatPiece& p : pieces) {
        if (p.index != i) continue;
        by_rank[size_t(r)].push_back(
            {section, name, t.shape(), p.begin, flat_slice(t, p.begin, p.end)});
      }
    }
  }
}

// whole_checkpoint() with its tensors in shards over `world` ranks.
inline CheckpointData sharded_checkpoint(int world) {
  CheckpointData whole = whole_checkpoint();
  CheckpointData d;
  d.step = whole.step;
  d.state = whole.state;
  std::vector<std::vector<TensorPiece>> by_rank(static_cast<size_t>(world));
  cut("model", whole.model, world, by_rank);
  cut("optimizer", whole.optimizer, world, by_rank);
  add_shards(d, world, by_rank);
  return d;
}

// The index entry of `section`/`name` in d.state["shards"].
inline nlohmann::json& index_entry(CheckpointData& d, const std::string& section,
                                   const std::string& name) {
  for (auto& t : d.state["shards"]["tensors"])
    if (t["section"] == section && t["name"] == name) return t;
  throw std::runtime_error("no index entry " + section + "/" + name);
}

}  // namespace cohort::ckpt::testing
