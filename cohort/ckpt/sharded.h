#pragma once
// Sharded checkpoints: tensors stored as pieces, one file per rank, readable on any world size.
//
// A sharded strategy (ZeRO) holds on rank r a contiguous slice of a flat space of tensors
// (flat_layout.h), so no rank has a whole tensor. Rank 0 gathers every rank's pieces and
// add_shards() records them in the CheckpointData it saves:
//   shard-<r>-of-<N>.safetensors   (CheckpointData::extra["shard-00001-of-00004"], r and N
//                                   zero padded to 5 digits) rank r's pieces, each a 1-D tensor
//                                   keyed "<section>/<name>@<begin>"
//   state.json "shards"            the index:
//     {"world": N,
//      "tensors": [{"section": "model", "name": "fc1.weight", "shape": [8, 4], "dtype": "F32",
//                   "pieces": [{"shard": 0, "begin": 0, "numel": 20},
//                              {"shard": 1, "begin": 20, "numel": 12}]}, ...]}
// "tensors" is an array (not an object) so that its order, the writers' flat layout order,
// survives JSON; "dtype" is the safetensors spelling. A piece holds elements
// [begin, begin + numel) of the row-major flattening of the tensor. Every shard file 0..N-1 is
// written, empty ones included, so a missing file is always an error.
// Tensors may also be stored whole in model.safetensors / optimizer.safetensors (DDP, and every
// checkpoint written before sharding): a reader sees them as one piece covering everything.
// A tensor is either whole or in pieces, never both.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cohort/ckpt/checkpoint.h"

namespace cohort::ckpt {

inline constexpr const char* kShardsKey = "shards";  // state.json key of the index
// The largest world a sharded checkpoint may have: shard files are numbered with five digits.
inline constexpr int kMaxShardWorld = 99999;

// Elements [begin, begin + data.numel()) of the row-major flattening of tensor `name` (global
// shape `global_shape`) in section "model" or "optimizer". `data` is 1-D; all pieces of one
// tensor share a dtype.
struct TensorPiece {
  std::string section;
  std::string name;
  Shape global_shape;
  int64_t begin = 0;
  Tensor data;
  // Where the piece lives, as ShardedView::pieces() reports it: the shard's rank, or -1 for a
  // tensor stored whole. add_shards ignores it (the position in pieces_by_rank says).
  int shard = -1;
};

// "shard-00001-of-00004": the CheckpointData::extra name of rank `rank`'s shard file.
std::string shard_file_name(int rank, int world);

// Records every rank's pieces in `d` (rank 0 calls it after gathering them): one shard file per
// rank and the index in d.state["shards"] (d.state must be a JSON object or null), replacing
// any shard files and index already there. Empty pieces are kept (a 0-element tensor is then
// still recorded). The result is checked as ShardedView would read it, so a hole, an overlap,
// a piece past the end, a shape or dtype that differs between pieces, or a tensor also stored
// whole is an InvalidArgument naming the tensor and the shard file; `d` is left unchanged then.
void add_shards(CheckpointData& d, int world,
                const std::vector<std::vector<TensorPiece>>& pieces_by_rank);

namespace internal {
// ShardedView's record of one tensor (internal: the reader's validation works on it).
struct ViewPiece {
  int shard = -1;  // -1: stored whole
  int64_t begin = 0, numel = 0;
  Tensor data;  // 1-D contiguous, set once its file is read
};
struct ViewEntry {
  std::string section, name;
  Shape shape;
  DType dtype = DType::f32;
  std::vector<ViewPiece> pieces;  // in element order once validated
};
}  // namespace internal

// Reads a checkpoint's tensors by name and element range, whatever world wrote them. The
// constructor validates everything up front and throws IoError naming the tensor and the shard
// file for: a shard file the index lists that is missing, or one that is there but not listed;
// a piece the index lists that its file does not hold, or a file holding a piece the index does
// not list; a piece whose data has another dtype or size than the index says; pieces that
// overlap; a hole (elements in no piece); a piece past the end; a tensor listed twice; a tensor
// both whole and in pieces; a malformed index. Calls with an unknown tensor or a range outside
// it are InvalidArgument. The view shares the checkpoint's tensors (handles, no copies).
class ShardedView {
 public:
  explicit ShardedView(const CheckpointData& d);

  // Shard files' world; 1 when the checkpoint has no index (whole tensors only).
  int world() const { return world_; }
  // Tensors of `section` ("model" or "optimizer"): index order, then whole-file tensors in file
  // order.
  std::vector<std::string> names(const std::string& section) const;
  bool has(const std::string& section, const std::string& name) const;
  const Shape& shape(const std::string& section, const std::string& name) const;
  DType dtype(const std::string& section, const std::string& name) const;
  // Elements [begin, end) of the tensor's flattening, as a new 1-D tensor assembled from its
  // pieces.
  Tensor read(const std::string& section, const std::string& name, int64_t begin,
              int64_t end) const;
  // The whole tensor, in its global shape (a new tensor).
  Tensor full(const std::string& section, const std::string& name) const;
  // Its pieces in element order (data: 1-D views of the checkpoint's tensors; shard -1 when it
  // is stored whole).
  std::vector<TensorPiece> pieces(const std::string& section, const std::string& name) const;

 private:
  void parse_index(const nlohmann::json& index);
  void attach_pieces(const CheckpointData& d, bool indexed);
  void add_whole(const std::string& section, const NamedTensors& tensors);
  const internal::ViewEntry& entry(const std::string& section, const std::string& name) const;

  int world_ = 1;
  std::vector<internal::ViewEntry> entries_;  // index order, then whole tensors
  std::map<std::string, size_t> by_key_;      // "<section>/<name>" -> entries_ position
};

// The same tensors and state re-cut for `world` ranks: each section's tensors (in names()
// order) laid out with FlatLayout and split into `world` shards (add_shards). world == 1 gives
// a consolidated checkpoint: whole tensors in model/optimizer, no shard files, no index. Step,
// state and other extra files are kept as they are (state's "shards" is replaced); per-rank
// strategy files are not re-cut. The source is validated as ShardedView does.
CheckpointData reshard(const CheckpointData& src, int world);

}  // namespace cohort::ckpt
