#include <gtest/gtest.h>

#include "cohort/ops/ops.h"
#include "tests/ops/error_message.h"
#include "tests/support/gradcheck.h"

namespace cohort {
namespace {

using testing::gradcheck;
using testing::invalid_argument_message;

TEST(Embedding, GathersRowsInIndexShape) {
  Tensor w = arange(12).reshape({4, 3});
  Tensor idx = from_vector_i64({3, 0, 3, 1}, {2, 2});
  Tensor y = ops::embedding(w, idx);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{9, 10, 11, 0, 1, 2, 9, 10, 11, 3, 4, 5}));
}

TEST(Embedding, BackwardSumsRepeatedIndices) {
  Tensor w = randn({5, 2}, 1).set_requires_grad(true);
  Tensor idx = from_vector_i64({2, 4, 2, 2}, {4});
  Tensor g = from_vector({1, 2, 10, 20, 100, 200, 1000, 2000}, {4, 2});
  ops::embedding(w, idx).backward(g);
  EXPECT_EQ(w.grad().to_vector<float>(),
            (std::vector<float>{0, 0, 0, 0, 1101, 2202, 0, 0, 10, 20}));
}

TEST(Embedding, Gradients) {
  Tensor idx = from_vector_i64({1, 0, 1, 3, 2, 1}, {2, 3});
  EXPECT_TRUE(
      gradcheck([idx](auto& in) { return ops::embedding(in[0], idx); }, {randn({4, 3}, 2)}));
}

TEST(Embedding, BadIndicesAreNamed) {
  Tensor w = randn({10, 4}, 1);
  EXPECT_EQ(invalid_argument_message([&] {
              ops::embedding(w, from_vector_i64({1, 2, 3, 12, 4}, {5}));
            }),
            "embedding: index 12 at position 3 of indices [5] is out of range for weight [10, 4] "
            "(V = 10)");
  EXPECT_EQ(invalid_argument_message([&] { ops::embedding(w, from_vector_i64({-1}, {1})); }),
            "embedding: index -1 at position 0 of indices [1] is out of range for weight [10, 4] "
            "(V = 10)");
  EXPECT_EQ(invalid_argument_message([&] { ops::embedding(w, randn({3}, 2)); }),
            "embedding: indices must be int64, got float32 (shape [3])");
}

}  // namespace
}  // namespace cohort
