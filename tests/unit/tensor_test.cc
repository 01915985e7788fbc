#include <gtest/gtest.h>

#include <set>

#include "cohort/core/rng.h"
#include "cohort/core/thread_pool.h"
#include "cohort/tensor/allocator.h"
#include "cohort/tensor/tensor.h"

namespace cohort {
namespace {

TEST(Tensor, FactoriesShapeAndStrides) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_THROW(t.size(3), InvalidArgument);
  EXPECT_EQ(full({2}, 2.5).to_vector<float>(), (std::vector<float>{2.5f, 2.5f}));
}

TEST(Tensor, DtypeMismatchIsAnError) {
  Tensor t = zeros({2});
  EXPECT_THROW(t.data<int64_t>(), InvalidArgument);
  EXPECT_THROW(zeros({2}, DType::i64).set_requires_grad(true), InvalidArgument);
}

TEST(Tensor, CopyConvertsDtypesAndStrides) {
  Tensor f = from_vector({1.5f, -2.0f, 3.0f, 4.0f}, {2, 2});
  Tensor i = empty({2, 2}, DType::i64);
  i.copy_(f);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 3, 4}));
  Tensor t = f.as_strided({2, 2}, {1, 2}, 0);  // transposed view
  EXPECT_EQ(t.clone_raw().to_vector<float>(), (std::vector<float>{1.5f, 3.0f, -2.0f, 4.0f}));
  EXPECT_THROW(i.copy_(zeros({3})), InvalidArgument);
}

TEST(Tensor, HalfTypesRoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 1e-7f, 3.14159f}) {
    EXPECT_NEAR(float(Float16(v)), v, std::abs(v) * 1e-3 + 6e-8) << v;
    EXPECT_NEAR(float(BFloat16(v)), v, std::abs(v) * 8e-3) << v;
  }
  EXPECT_TRUE(std::isinf(float(Float16(1e6f))));
}

TEST(Allocator, ReusesBlocksSoSteadyStateDoesNoSystemAllocation) {
  { Tensor warm = empty({1000, 37}); }
  uint64_t before = CpuAllocator::instance().stats().system_allocs;
  for (int i = 0; i < 100; ++i) {
    Tensor a = empty({1000, 37});
    Tensor b = empty({1000, 37});
  }
  // The first loop iteration may need one more block (two live at once); then none.
  EXPECT_LE(CpuAllocator::instance().stats().system_allocs - before, 1u);
}

TEST(Rng, CounterBasedAndThreadCountIndependent) {
  set_num_threads(1);
  std::vector<float> one = randn({10001}, 42).to_vector<float>();
  set_num_threads(2);
  std::vector<float> two = randn({10001}, 42).to_vector<float>();
  set_num_threads(0);
  EXPECT_EQ(one, two);
  EXPECT_NE(randn({8}, 1).to_vector<float>(), randn({8}, 2).to_vector<float>());
  double mean = 0, var = 0;
  for (float v : one) mean += v;
  mean /= double(one.size());
  for (float v : one) var += (v - mean) * (v - mean);
  var /= double(one.size());
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(var, 1.0, 0.05);
  EXPECT_NE(derive_seed(1, "a.weight"), derive_seed(1, "b.weight"));
}

TEST(ThreadPool, CoversRangeDisjointlyAndRethrows) {
  set_num_threads(2);
  std::vector<int> hits(1000, 0);
  parallel_for(0, 1000, 10, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) hits[size_t(i)]++;
  });
  for (int h : hits) EXPECT_EQ(h, 1);
  EXPECT_THROW(parallel_for(0, 100, 1, [](int64_t, int64_t) { throw InvalidArgument("x"); }),
               InvalidArgument);
  set_num_threads(0);
}

// Wide dtypes (i64, f64) take their own copy path: a non-contiguous view of one made
// contiguous used to recurse until the stack overflowed.
TEST(Tensor, ContiguousCopyOfANonContiguousInt64AndFloat64View) {
  for (DType t : {DType::i64, DType::f64}) {
    Tensor a = empty({2, 3}, t);
    for (int64_t i = 0; i < 6; ++i) a.as_strided({1}, {1}, i).fill_(double(i));
    Tensor c = a.slice(1, 1, 3).contiguous_raw();
    ASSERT_TRUE(c.is_contiguous());
    Tensor back = empty({2, 2}, DType::f32);
    back.copy_(c);
    EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{1, 2, 4, 5})) << dtype_name(t);
    Tensor flat = empty({4}, t);
    flat.copy_(a.transpose(0, 1).slice(0, 0, 2));  // another shape, non-contiguous source
    Tensor f = empty({4}, DType::f32);
    f.copy_(flat);
    EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{0, 3, 1, 4})) << dtype_name(t);
  }
}

}  // namespace
}  // namespace cohort
