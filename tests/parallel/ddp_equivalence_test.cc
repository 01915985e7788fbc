// The headline: N workers with DDP train exactly like one model on the union of their batches,
// and every rank holds bit-identical parameters after every step.
#include <gtest/gtest.h>

#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/ddp/ddp.h"
#include "tests/parallel/ddp_test_util.h"

namespace cohort::parallel {
namespace {

using namespace testing;

constexpr int64_t kIn = 6, kClasses = 4, kPerRank = 5, kSteps = 5;
const std::vector<int64_t> kSizes = {kIn, 16, 12, kClasses};
const optim::SgdOptions kSgd{.lr = 0.1, .momentum = 0.9};
// Small caps: the 6 parameters land in several buckets.
const DdpOptions kSmallBuckets{.bucket_bytes = 512, .first_bucket_bytes = 128};

std::pair<Tensor, Tensor> step_batch(int world, int step) {
  return make_batch(world * kPerRank, kIn, kClasses, 1000 + uint64_t(step));
}

// One model, batch N*B per step.
std::vector<float> reference(int world) {
  nn::MLP model(kSizes, {.seed = 7});
  optim::SGD opt(model.named_parameters(), kSgd);
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = step_batch(world, s);
    Tensor loss = nn::cross_entropy(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  return flat_params(model);
}

// params[rank][step]: every rank's parameters after every step.
using History = std::vector<std::vector<std::vector<float>>>;

// shared_arena: buckets in the communicators' shared arenas, reduced in place by every bucket
// size (Algorithm::kSharedBuffers); otherwise these small buckets take the rings.
History train_ddp(int world, bool shared_arena = false, DdpOptions ddp_options = kSmallBuckets,
                  optim::ZeroGrad zero = optim::ZeroGrad::kSetToNone) {
  History params(static_cast<size_t>(world), std::vector<std::vector<float>>(kSteps));
  comm::CommOptions options = ddp_comm_options();
  options.shared_buffers_min_bytes = shared_arena ? 1 : size_t{1} << 40;
  run_world(
      world,
      [&](int r, PG pg) {
        nn::MLP model(kSizes, {.seed = 7});
        DDP ddp(model, pg, ddp_options);
        optim::SGD opt(model.named_parameters(), kSgd);
        for (int s = 0; s < kSteps; ++s) {
          auto [x, y] = rows_of(step_batch(world, s), r * kPerRank, (r + 1) * kPerRank);
          Tensor loss = nn::cross_entropy(ddp(x), y);
          opt.zero_grad(zero);
          loss.backward();
          opt.step();
          params[size_t(r)][size_t(s)] = flat_params(model);
        }
        EXPECT_GE(ddp.last_step().buckets, 3);
      },
      options);
  return params;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, double(std::abs(got[i] - want[i])));
    scale = std::max(scale, double(std::abs(want[i])));
  }
  EXPECT_LE(diff / scale, 1e-5);
}

class DdpEquivalence : public ::testing::TestWithParam<int> {};

TEST_P(DdpEquivalence, MatchesOneModelOnTheUnionBatchAndRanksAreBitIdentical) {
  int world = GetParam();
  History got = train_ddp(world);
  for (int s = 0; s < kSteps; ++s) {
    for (int r = 1; r < world; ++r) {
      ASSERT_EQ(got[size_t(r)][size_t(s)], got[0][size_t(s)])
          << "rank " << r << " differs from rank 0 after step " << s;
    }
  }
  expect_close(got[0][kSteps - 1], reference(world));
}

INSTANTIATE_TEST_SUITE_P(Worlds, DdpEquivalence, ::testing::Values(2, 3, 4));

// Buckets reduced in place in the shared arenas: the same training, every rank bit-identical,
// bit-identical run to run, and with two ranks (a + b either way) identical to the rings.
TEST(DdpSharedArena, MatchesTheReferenceAndTheRings) {
  for (int world : {2, 3}) {
    History got = train_ddp(world, /*shared_arena=*/true);
    for (int r = 1; r < world; ++r) EXPECT_EQ(got[size_t(r)][kSteps - 1], got[0][kSteps - 1]);
    expect_close(got[0][kSteps - 1], reference(world));
    EXPECT_EQ(got[0][kSteps - 1], train_ddp(world, true)[0][kSteps - 1]) << world;
    if (world == 2) {
      EXPECT_EQ(got[0][kSteps - 1], train_ddp(2)[0][kSteps - 1]);
    }
  }
}

// gradient_as_bucket_view (the default) changes where .grad lives, not a single bit of the
// training: with either zero_grad mode, with the rings or the shared arena, it matches the copy
// back into separate .grad tensors.
TEST(DdpGradientAsBucketView, TrainsBitIdenticallyToSeparateGrads) {
  DdpOptions copies = kSmallBuckets;
  copies.gradient_as_bucket_view = false;
  for (bool arena : {false, true}) {
    std::vector<float> want = train_ddp(2, arena, copies)[0][kSteps - 1];
    EXPECT_EQ(train_ddp(2, arena)[0][kSteps - 1], want) << "arena " << arena;
    EXPECT_EQ(train_ddp(2, arena, kSmallBuckets, optim::ZeroGrad::kFillZero)[0][kSteps - 1], want)
        << "arena " << arena;
  }
}

// The buckets are rebuilt after the first step; with views the old ones must be freed first,
// or an arena sized for one set of buckets runs out and every later step falls back to
// ordinary memory (the rings).
TEST(DdpGradientAsBucketView, RebuiltBucketsFitInAnArenaForOneSet) {
  comm::CommOptions options = ddp_comm_options();
  options.device.shm_arena_bytes = 2560;  // one set of buckets (~1.9 KiB with padding), not two
  options.shared_buffers_min_bytes = 1;
  auto store = std::make_shared<rendezvous::HashStore>();
  set_num_threads(1);
  comm::testing::run_ranks(2, [&](int r) {
    auto c = comm::Communicator::create(store, r, 2, options);
    nn::MLP model(kSizes, {.seed = 7});
    DDP ddp(model, comm::make_process_group(c), kSmallBuckets);
    optim::SGD opt(model.named_parameters(), kSgd);
    for (int s = 0; s < 4; ++s) {
      auto [x, y] = rows_of(step_batch(2, s), r * kPerRank, (r + 1) * kPerRank);
      opt.zero_grad(optim::ZeroGrad::kFillZero);
      nn::cross_entropy(ddp(x), y).backward();
      opt.step();
    }
    for (const auto& [name, t] : model.named_parameters()) {
      EXPECT_TRUE(c->in_shared_arena(t.grad().raw_data(), size_t(t.numel()) * 4)) << name;
    }
  });
}

// With views, .grad lies in the bucket (the shared arena), holds the averaged gradient (the
// same on every rank) and, when zero_grad fills zeros, keeps its memory from step to step:
// backward accumulates into the bucket. Without views .grad is ordinary memory.
TEST(DdpGradientAsBucketView, GradIsTheAveragedSlotAndStaysPut) {
  constexpr int kWorld = 2;
  for (bool views : {true, false}) {
    std::vector<std::vector<float>> grads(kWorld);
    auto store = std::make_shared<rendezvous::HashStore>();
    set_num_threads(1);
    comm::testing::run_ranks(kWorld, [&](int r) {
      auto c = comm::Communicator::create(store, r, kWorld, ddp_comm_options());
      ASSERT_TRUE(c->has_shared_arena());
      nn::MLP model(kSizes, {.seed = 7});
      DdpOptions options = kSmallBuckets;
      options.gradient_as_bucket_view = views;
      DDP ddp(model, comm::make_process_group(c), options);
      optim::SGD opt(model.named_parameters(), kSgd);
      std::vector<const void*> where;
      for (int s = 0; s < 4; ++s) {
        auto [x, y] = rows_of(step_batch(kWorld, s), r * kPerRank, (r + 1) * kPerRank);
        opt.zero_grad(optim::ZeroGrad::kFillZero);
        nn::cross_entropy(ddp(x), y).backward();
        std::vector<const void*> now;
        for (const auto& [name, t] : model.named_parameters()) {
          now.push_back(t.grad().raw_data());
          // Step 0's .grad gets memory of its own when the buckets are rebuilt after it.
          if (s > 0) {
            EXPECT_EQ(c->in_shared_arena(now.back(), size_t(t.numel()) * 4), views) << name;
          }
        }
        // Step 0 binds .grad to the first buckets, step 1 to the rebuilt ones; then they stay.
        if (s == 3) {
          EXPECT_EQ(now, where) << "rank " << r << ": .grad moved between steps";
        }
        where = now;
        opt.step();
      }
      for (const auto& [name, t] : model.named_parameters()) {
        auto g = t.grad().to_vector<float>();
        grads[size_t(r)].insert(grads[size_t(r)].end(), g.begin(), g.end());
      }
    });
    EXPECT_EQ(grads[1], grads[0]);
  }
}

TEST(DdpDeterminism, TwoRunsAreBitIdentical) {
  EXPECT_EQ(train_ddp(2)[0][kSteps - 1], train_ddp(2)[0][kSteps - 1]);
}

// no_sync over micro-batches 0 and 1, then a synced backward on 2, then one step == one model
// stepping once on the summed loss of the three (union) micro-batches.
// Each zero_grad mode: with kFillZero the micro-batches accumulate into the bucket views that a
// warm-up synced backward (no optimizer step) bound .grad to.
class DdpNoSync : public ::testing::TestWithParam<optim::ZeroGrad> {};

TEST_P(DdpNoSync, AccumulatedMicroStepsMatchTheSummedLoss) {
  constexpr int kWorld = 2, kMicro = 3;
  auto micro = [](int m) { return make_batch(kWorld * kPerRank, kIn, kClasses, 50 + m); };
  nn::MLP ref(kSizes, {.seed = 3});
  {
    optim::SGD opt(ref.named_parameters(), kSgd);
    Tensor loss;
    for (int m = 0; m < kMicro; ++m) {
      auto [x, y] = micro(m);
      Tensor l = nn::cross_entropy(ref(x), y);
      loss = loss.defined() ? ops::add(loss, l) : l;
    }
    loss.backward();
    opt.step();
  }
  std::vector<std::vector<float>> got(kWorld);
  run_world(kWorld, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = 3});
    DDP ddp(model, pg, kSmallBuckets);
    optim::SGD opt(model.named_parameters(), kSgd);
    auto [wx, wy] = rows_of(micro(kMicro), r * kPerRank, (r + 1) * kPerRank);
    nn::cross_entropy(ddp(wx), wy).backward();
    opt.zero_grad(GetParam());
    for (int m = 0; m < kMicro; ++m) {
      auto [x, y] = rows_of(micro(m), r * kPerRank, (r + 1) * kPerRank);
      if (m < kMicro - 1) {
        auto guard = ddp.no_sync();
        uint64_t sent = pg->bytes_sent();
        nn::cross_entropy(ddp(x), y).backward();
        EXPECT_EQ(pg->bytes_sent(), sent) << "a no_sync backward communicated";
      } else {
        nn::cross_entropy(ddp(x), y).backward();
      }
    }
    opt.step();
    got[size_t(r)] = flat_params(model);
  });
  EXPECT_EQ(got[1], got[0]);
  expect_close(got[0], flat_params(ref));
}

INSTANTIATE_TEST_SUITE_P(ZeroGradModes, DdpNoSync,
                         ::testing::Values(optim::ZeroGrad::kSetToNone,
                                           optim::ZeroGrad::kFillZero));

}  // namespace
}  // namespace cohort::parallel
