// Tensor parallelism, piece by piece: the differentiable collectives (analytic gradients), the
// column/row/embedding layers and the vocab-parallel loss against their unsharded versions.
// The GPT built from them: tp_gpt_test.cc.
#include <gtest/gtest.h>

#include "cohort/nn/layers.h"
#include "cohort/nn/loss.h"
#include "cohort/ops/ops.h"
#include "cohort/parallel/tensor/tensor_parallel.h"
#include "tests/parallel/ddp_test_util.h"
#include "tests/parallel/tp_test_util.h"

namespace cohort::parallel {
namespace {

using testing::bit_equal;
using testing::piece;
using testing::rel_diff;
using testing::run_world;

Tensor leaf(const Shape& shape, uint64_t seed) {
  Tensor t = randn(shape, seed);
  t.set_requires_grad(true);
  return t;
}
Tensor weighted_sum(const Tensor& y, const Tensor& w) {
  return ops::sum(y * w);
}
// Rank 0's copy of t, on every rank: for bit-identity checks.
Tensor rank0(const Tensor& t, comm::ProcessGroup& g) {
  Tensor out = t.contiguous_raw().clone_raw();
  g.broadcast({.buffer = out.data<float>(), .count = size_t(out.numel()), .root = 0});
  return out;
}

class TpCollectives : public ::testing::TestWithParam<int> {};

TEST_P(TpCollectives, CopyToGroupIsIdentityWithSummedGradient) {
  const int c = GetParam();
  run_world(c, [&](int r, testing::PG g) {
    Tensor x = leaf({3, 5}, 7);
    Tensor y = copy_to_group(x, g);
    EXPECT_TRUE(bit_equal(y, x));
    weighted_sum(y, randn({3, 5}, 100 + r)).backward();
    Tensor want = zeros({3, 5});
    for (int k = 0; k < c; ++k) want = want + randn({3, 5}, 100 + k);
    EXPECT_LT(rel_diff(x.grad(), want), 1e-6);
    EXPECT_TRUE(bit_equal(x.grad(), rank0(x.grad(), *g)));
  });
}

TEST_P(TpCollectives, ReduceFromGroupSumsWithIdentityGradient) {
  const int c = GetParam();
  run_world(c, [&](int r, testing::PG g) {
    Tensor x = leaf({4, 3}, 10 + r);
    Tensor y = reduce_from_group(x, g);
    Tensor want = zeros({4, 3});
    for (int k = 0; k < c; ++k) want = want + randn({4, 3}, 10 + k);
    EXPECT_LT(rel_diff(y, want), 1e-6);
    EXPECT_TRUE(bit_equal(y, rank0(y, *g)));
    EXPECT_TRUE(bit_equal(x, randn({4, 3}, 10 + r))) << "the input must not be summed in place";
    Tensor w = randn({4, 3}, 99);
    weighted_sum(y, w).backward();
    EXPECT_TRUE(bit_equal(x.grad(), w));
  });
}

TEST_P(TpCollectives, GatherFromGroupConcatenatesLastDimWithSlicedGradient) {
  const int c = GetParam();
  run_world(c, [&](int r, testing::PG g) {
    Tensor x = leaf({2, 3, 4}, 10 + r);
    Tensor y = gather_from_group(x, g);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 4 * c}));
    for (int k = 0; k < c; ++k)
      EXPECT_TRUE(bit_equal(y.slice(2, 4 * k, 4 * k + 4), randn({2, 3, 4}, 10 + k))) << k;
    Tensor w = randn({2, 3, 4 * c}, 99);
    weighted_sum(y, w).backward();
    EXPECT_TRUE(bit_equal(x.grad(), w.slice(2, 4 * r, 4 * r + 4)));
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TpCollectives, ::testing::Values(2, 3));

class TpLayers : public ::testing::TestWithParam<int> {};

TEST_P(TpLayers, ColumnParallelLinearIsItsSliceOfLinear) {
  const int c = GetParam();
  for (int64_t parts : {1, 2}) {
    nn::Linear full(6, 16);
    Tensor x_full = leaf({3, 6}, 5);
    Tensor w = randn({3, 16}, 6);
    Tensor y_full = full(x_full);
    weighted_sum(y_full, w).backward();
    run_world(c, [&](int r, testing::PG g) {
      ColumnParallelLinear col(6, 16, parts, true, g);
      EXPECT_TRUE(bit_equal(col.weight(), piece(full.weight(), 0, parts, c, r)));
      EXPECT_TRUE(bit_equal(col.bias(), piece(full.bias(), 0, parts, c, r)));
      Tensor x = leaf({3, 6}, 5);
      Tensor y = col(x);
      EXPECT_LT(rel_diff(y, piece(y_full, 1, parts, c, r)), 1e-6);
      weighted_sum(y, piece(w, 1, parts, c, r)).backward();
      EXPECT_LT(rel_diff(x.grad(), x_full.grad()), 1e-5);
      EXPECT_LT(rel_diff(col.weight().grad(), piece(full.weight().grad(), 0, parts, c, r)), 1e-6);
      EXPECT_LT(rel_diff(col.bias().grad(), piece(full.bias().grad(), 0, parts, c, r)), 1e-6);
    });
  }
}

TEST_P(TpLayers, RowParallelLinearSumsToLinear) {
  const int c = GetParam();
  nn::Linear full(8, 5);
  Tensor x_full = leaf({3, 8}, 5);
  Tensor w = randn({3, 5}, 6);
  Tensor y_full = full(x_full);
  weighted_sum(y_full, w).backward();
  run_world(c, [&](int r, testing::PG g) {
    RowParallelLinear row(8, 5, true, g);
    EXPECT_TRUE(bit_equal(row.weight(), piece(full.weight(), 1, 1, c, r)));
    EXPECT_TRUE(bit_equal(row.bias(), full.bias()));
    Tensor x = piece(x_full, 1, 1, c, r);
    x.set_requires_grad(true);
    Tensor y = row(x);
    EXPECT_LT(rel_diff(y, y_full), 1e-5);
    EXPECT_TRUE(bit_equal(y, rank0(y, *g)));
    weighted_sum(y, w).backward();
    EXPECT_LT(rel_diff(x.grad(), piece(x_full.grad(), 1, 1, c, r)), 1e-6);
    EXPECT_LT(rel_diff(row.weight().grad(), piece(full.weight().grad(), 1, 1, c, r)), 1e-6);
    EXPECT_LT(rel_diff(row.bias().grad(), full.bias().grad()), 1e-6);
  });
}

TEST_P(TpLayers, VocabParallelEmbeddingIsEmbedding) {
  const int c = GetParam();
  nn::Embedding full(12, 4);
  Tensor ids = from_vector_i64({0, 5, 11, 3, 3, 7}, {2, 3});
  Tensor w = randn({2, 3, 4}, 6);
  Tensor y_full = full(ids);
  weighted_sum(y_full, w).backward();
  run_world(c, [&](int r, testing::PG g) {
    VocabParallelEmbedding emb(12, 4, g);
    EXPECT_TRUE(bit_equal(emb.weight(), piece(full.weight(), 0, 1, c, r)));
    Tensor y = emb(ids);
    EXPECT_TRUE(bit_equal(y, y_full)) << "one rank owns each row: the sum adds only zeros";
    weighted_sum(y, w).backward();
    EXPECT_TRUE(bit_equal(emb.weight().grad(), piece(full.weight().grad(), 0, 1, c, r)));
    EXPECT_THROW(emb(from_vector_i64({12}, {1})), InvalidArgument);
  });
}

TEST_P(TpLayers, VocabParallelCrossEntropyIsCrossEntropy) {
  const int c = GetParam();
  for (Shape shape : {Shape{7, 16}, Shape{3, 3, 16}}) {  // N = 7 and 9: odd
    Shape lead(shape.begin(), shape.end() - 1);
    const int64_t n = shape_numel(lead);
    std::vector<int64_t> t;
    for (int64_t i = 0; i < n; ++i) t.push_back((i * 5 + 3) % 16);
    Tensor targets = from_vector_i64(t, lead);
    Tensor logits = randn(shape, 8) * 3.0;
    Tensor full = logits.detach();
    full.set_requires_grad(true);
    Tensor want = nn::cross_entropy(full, targets);
    want.backward();
    const int64_t last = int64_t(shape.size()) - 1;
    run_world(c, [&](int r, testing::PG g) {
      Tensor local = piece(logits, last, 1, c, r);
      local.set_requires_grad(true);
      Tensor loss = vocab_parallel_cross_entropy(local, targets, g);
      EXPECT_LT(rel_diff(loss, want), 1e-6);
      EXPECT_TRUE(bit_equal(loss, rank0(loss, *g)));
      loss.backward();
      EXPECT_LT(rel_diff(local.grad(), piece(full.grad(), last, 1, c, r)), 1e-5);
      EXPECT_THROW(vocab_parallel_cross_entropy(
                       local, from_vector_i64(std::vector<int64_t>(size_t(n), 16), lead), g),
                   InvalidArgument);
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TpLayers, ::testing::Values(2, 4));

}  // namespace
}  // namespace cohort::parallel
