// CUDA tensors (device/cuda_memory.h): to the GPU and back, the cache that keeps a step from
// calling cudaMalloc after its first, and the out-of-memory error. Skipped without a GPU.
#include "cohort/device/cuda_memory.h"

#include "cohort/tensor/tensor.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::device {
namespace {

TEST(CudaMemory, EnableCudaSaysWhyWhereThereIsNoGpu) {
  std::string why;
  const bool ok = enable_cuda(&why);
  if (cuda::device_count() == 0) {
    EXPECT_FALSE(ok);
    EXPECT_FALSE(why.empty());
    EXPECT_THROW(empty({4}, DType::f32, Device::cuda(0)), InvalidArgument);
  } else {
    EXPECT_TRUE(ok) << why;
  }
}

TEST(CudaMemory, TensorsGoToTheGpuAndBackUnchanged) {
  COHORT_REQUIRE_GPU();
  ASSERT_TRUE(enable_cuda());
  const auto values = cuda::testing::random_floats(10007, 1);
  Tensor host = empty({int64_t(values.size())}, DType::f32);
  std::copy(values.begin(), values.end(), host.data<float>());
  Tensor gpu = host.to(Device::cuda(0));
  EXPECT_EQ(gpu.device(), Device::cuda(0));
  EXPECT_EQ(gpu.to(Device::cpu()).to_vector<float>(), values);
  gpu.fill_(-1.25);
  EXPECT_EQ(gpu.to_vector<float>(), std::vector<float>(values.size(), -1.25f));
  EXPECT_THROW(empty({4}, DType::f32, Device::cuda(cuda::device_count())), InvalidArgument)
      << "a GPU this process does not see";
}

TEST(CudaMemory, AStepAfterTheFirstCallsNoCudaMalloc) {
  COHORT_REQUIRE_GPU();
  ASSERT_TRUE(enable_cuda());
  auto step = [] {
    Tensor a = empty({512, 768}, DType::f32, Device::cuda(0));
    Tensor b = empty({768}, DType::f32, Device::cuda(0));
    Tensor c = empty({512, 3072}, DType::f32, Device::cuda(0));
  };
  step();
  const uint64_t after_first = cuda_memory_stats(0).system_allocs;
  for (int i = 0; i < 10; ++i) step();
  EXPECT_EQ(cuda_memory_stats(0).system_allocs, after_first);
  cuda_empty_cache();
  EXPECT_EQ(cuda_memory_stats(0).bytes_cached, 0u);
}

TEST(CudaMemory, OutOfMemoryNamesTheGpuAndWhatIsInUse) {
  COHORT_REQUIRE_GPU();
  ASSERT_TRUE(enable_cuda());
  try {
    empty({int64_t{1} << 48}, DType::f32, Device::cuda(0));  // 1 PiB
    FAIL() << "a 1 PiB tensor was allocated";
  } catch (const cuda::CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("out of GPU memory on cuda:0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cohort::device
