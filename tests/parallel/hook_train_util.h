#pragma once
// DDP comm-hook tests' shared run: a small MLP trained by kWorld ranks (threads) under DDP
// with small buckets, each rank with the hook a factory makes (none: the default hook).
#include <functional>
#include <memory>
#include <vector>

#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/ddp/comm_hook.h"
#include "cohort/parallel/ddp/ddp.h"
#include "tests/parallel/ddp_test_util.h"

namespace cohort::parallel::testing {

inline const std::vector<int64_t> kSizes = {12, 16, 8, 5};
inline const DdpOptions kSmallBuckets{.bucket_bytes = 512, .first_bucket_bytes = 128};
inline constexpr int kWorld = 2, kPerRank = 6;

// Every rank's flat parameters after `steps` SGD steps (lr 0.1) on its rows of a fixed batch;
// `make_hook(rank)` gives the rank's hook (null: DDP's default).
inline std::vector<std::vector<float>> train_with_hook(
    const std::function<std::shared_ptr<CommHook>(int rank)>& make_hook, int steps) {
  std::vector<std::vector<float>> out(kWorld);
  run_world(kWorld, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = 7});
    DDP ddp(model, pg, kSmallBuckets);
    if (std::shared_ptr<CommHook> h = make_hook ? make_hook(r) : nullptr) ddp.register_comm_hook(h);
    optim::SGD opt(model.named_parameters(), {.lr = 0.1});
    for (int s = 0; s < steps; ++s) {
      auto [x, y] = rows_of(make_batch(kWorld * kPerRank, 12, 5, 300 + uint64_t(s)), r * kPerRank,
                            (r + 1) * kPerRank);
      opt.zero_grad();
      nn::cross_entropy(ddp(x), y).backward();
      opt.step();
    }
    out[size_t(r)] = flat_params(model);
  });
  return out;
}

}  // namespace cohort::parallel::testing
