// The headline: N workers with DDP train exactly like one model on the union of their batches,
// and every rank holds bit-identical parameters after every step.
#include <gtest/gtest.h>

#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/ddp.h"
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
History train_ddp(int world, bool shared_arena = false) {
  History params(static_cast<size_t>(world), std::vector<std::vector<float>>(kSteps));
  comm::CommOptions options = ddp_comm_options();
  options.shared_buffers_min_bytes = shared_arena ? 1 : size_t{1} << 40;
  run_world(
      world,
      [&](int r, PG pg) {
        nn::MLP model(kSizes, {.seed = 7});
        DDP ddp(model, pg, kSmallBuckets);
        optim::SGD opt(model.named_parameters(), kSgd);
        for (int s = 0; s < kSteps; ++s) {
          auto [x, y] = rows_of(step_batch(world, s), r * kPerRank, (r + 1) * kPerRank);
          Tensor loss = nn::cross_entropy(ddp(x), y);
          opt.zero_grad();
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
    if (world == 2) EXPECT_EQ(got[0][kSteps - 1], train_ddp(2)[0][kSteps - 1]);
  }
}

TEST(DdpDeterminism, TwoRunsAreBitIdentical) {
  EXPECT_EQ(train_ddp(2)[0][kSteps - 1], train_ddp(2)[0][kSteps - 1]);
}

// no_sync over micro-batches 0 and 1, then a synced backward on 2, then one step == one model
// stepping once on the summed loss of the three (union) micro-batches.
TEST(DdpNoSync, AccumulatedMicroStepsMatchTheSummedLoss) {
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
    opt.zero_grad();
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

}  // namespace
}  // namespace cohort::parallel
