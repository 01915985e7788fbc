// In-place recovery of ZeroEngine (zero_engine.h, docs/elastic.md): after a rank was lost, the
// members rebuild the full parameters and optimizer state from what they hold (their own shards,
// and the neighbour's copy of a lost rank's shard), so a new engine can shard them over the new
// world as a resume from a checkpoint would, without reading one.
//
// One buffer travels: for each unit, its parameters and then each optimizer slot, every one
// laid out [world * S] as the unit's flat buffer. Each member writes the ranges it holds and
// -0 elsewhere, and one allreduce (sum) over the members assembles it: every range is written by
// exactly one member (its owner, or the owner's neighbour below when the owner was lost), and
// x + (-0) is x, so the result is each shard's state bit for bit.
#include <algorithm>

#include "cohort/autograd/node.h"
#include "cohort/parallel/zero/zero_engine.h"

namespace cohort::parallel {
namespace {

// Where one tensor of a unit (its parameters, or a slot) lies in the buffer: [offset, + world*S).
struct Piece {
  size_t unit = 0;
  std::string slot;  // "" for the parameters
  int64_t offset = 0;
};

// A tensor of `shape` with storage of its own, holding `numel` elements of `from`.
Tensor own_copy(const Tensor& from, int64_t begin, const Shape& shape) {
  Tensor out = zeros(shape);
  range_of(out, 0, out.numel()).copy_(range_of(from, begin, out.numel()));
  return out;
}

}  // namespace

optim::OptimizerState ZeroEngine::consolidate(comm::ProcessGroup& group,
                                              const std::vector<int>& members) {
  auto member = [&](int r) {
    return std::find(members.begin(), members.end(), r) != members.end();
  };
  for (int r = 0; r < world_; ++r) {
    const int below = (r + world_ - 1) % world_;
    COHORT_CHECK_IO(member(r) || (redundant() && member(below)), "elastic: zero: rank ", r,
                    "'s shard was kept by ranks ", r, " and ", below,
                    " only (each rank keeps its own shard and its neighbour's), and both were "
                    "lost; the job stops (--max-restarts restarts it from the last checkpoint)");
  }
  drain();
  const bool keeps_lost_buddy = redundant() && !member(buddy_rank());
  const optim::OptimizerState own = shard_opt_->export_state();
  const optim::OptimizerState buddy =
      keeps_lost_buddy ? buddy_opt_->export_state() : optim::OptimizerState{};
  std::vector<Piece> pieces;
  int64_t total = 0;
  for (size_t k = 0; k < units_.size(); ++k) {
    const int64_t n = units_[k].layout.shard_size() * world_;
    pieces.push_back({k, "", total});
    total += n;
    for (const std::string& slot : shard_opt_->slot_names()) {
      if (!own.tensors.count(unit_key(units_[k]) + "." + slot)) continue;  // no step yet
      pieces.push_back({k, slot, total});
      total += n;
    }
  }
  Tensor all = full({total}, -0.0);  // x + (-0) is x for every x, -0 included
  autograd::NoGradGuard no_grad;
  for (const Piece& p : pieces) {
    const Unit& u = units_[p.unit];
    const int64_t S = u.layout.shard_size();
    const std::string key = unit_key(u) + "." + p.slot;
    range_of(all, p.offset + rank_ * S, S).copy_(p.slot.empty() ? u.shard : own.tensors.at(key));
    if (keeps_lost_buddy)
      range_of(all, p.offset + buddy_rank() * S, S)
          .copy_(p.slot.empty() ? u.buddy : buddy.tensors.at(key));
  }
  group.allreduce({.output = all.raw_data(), .count = size_t(total), .timeout = options_.timeout});

  optim::OptimizerState out;
  out.scalars["lr"] = shard_opt_->lr();
  for (const Piece& p : pieces) {
    Unit& u = units_[p.unit];
    for (size_t i = 0; i < u.plan.params.size(); ++i) {
      auto& [name, param] = u.plan.params[i];
      Tensor whole = own_copy(all, p.offset + u.layout.offset(i), param.shape());
      if (!p.slot.empty()) {
        out.tensors[name + "." + p.slot] = whole;
        continue;
      }
      // The parameter leaves the unit's buffer: every handle to it (the model's, the user
      // optimizer's) now sees storage of its own, which a new engine may shard anew.
      param.impl().storage = whole.impl().storage;
      param.impl().offset = 0;
      param.set_grad(Tensor());
      if (const int64_t step = shard_opt_->step_count(p.unit); step > 0)
        out.scalars[name + ".step"] = double(step);
    }
  }
  return out;
}

}  // namespace cohort::parallel
