#pragma once
// The parameter server's key space: every parameter (registration order, a tied weight once)
// laid end to end as one flat f32 vector, split into S contiguous key ranges balanced by bytes
// (ckpt/flat_layout.h, ShardRule::kBalanced: the one flat layout's rule for servers).
// A large tensor may span servers. Pure functions: every worker and every server computes the
// same layout and ranges from the same model, which is what makes push/pull addressing agree.
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/tensor/tensor.h"

namespace cohort::ps {

// One parameter's place in the flat key space: keys [offset, offset + numel).
struct ParamSlot {
  std::string name;
  int64_t numel = 0;
  int64_t offset = 0;
  size_t index = 0;  // position in the NamedTensors the layout was made from
};

struct Layout {
  std::vector<ParamSlot> params;
  int64_t total = 0;  // keys (f32 elements) in all
};

// Keys [begin, end) owned by one server.
struct KeyRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const KeyRange&) const = default;
};

// The layout of named f32 tensors, in the given order; a tensor that appears twice under two
// names (tied weights) is laid out once, under its first name. InvalidArgument for a tensor
// that is not f32.
Layout layout_of(const NamedTensors& params);

// S contiguous ranges covering [0, total) in order, each within one element of total / S
// (every key is 4 bytes, so balanced by keys is balanced by bytes). InvalidArgument if S < 1 or
// S > total (a server with no keys).
std::vector<KeyRange> partition_keys(int64_t total, int num_servers);

// The first parameter where two layouts differ, as "'name' (N elements)" against the other's,
// or empty when they are the same.
std::string first_difference(const Layout& mine, const Layout& theirs,
                             const std::string& mine_label, const std::string& theirs_label);

// Copies between the flat key space and the tensors of `params` (the same list layout_of saw).
// `flat` holds keys [range.begin, range.end); only the overlapping part of each tensor moves.
// A tensor without a gradient reads as zeros in gather_grads.
void gather_values(const NamedTensors& params, const Layout& layout, KeyRange range, float* flat);
void gather_grads(const NamedTensors& params, const Layout& layout, KeyRange range, float* flat);
void scatter_values(const NamedTensors& params, const Layout& layout, KeyRange range,
                    const float* flat);

}  // namespace cohort::ps
