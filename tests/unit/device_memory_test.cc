// Tensors on a device other than the CPU, through tensor/device_memory.h, tested here with a
// stand-in device whose memory is host memory: what every backend (CUDA's in device/) must
// give tensor/, and the errors a device without a backend gives.
#include "cohort/tensor/device_memory.h"

#include <gtest/gtest.h>

#include "cohort/tensor/allocator.h"
#include "cohort/tensor/block_cache.h"
#include "cohort/tensor/tensor.h"
#include "tests/support/stand_in_device.h"

namespace cohort {
namespace {

// Registers a stand-in for the test and unregisters it after.
class DeviceMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override { set_device_memory(Device::Kind::kCUDA, &device_); }
  void TearDown() override { set_device_memory(Device::Kind::kCUDA, nullptr); }
  testing::StandInDevice device_;
};

TEST(DeviceMemoryAbsent, ATensorOnADeviceWithoutABackendSaysWhy) {
  try {
    empty({2, 3}, DType::f32, Device::cuda(0));
    FAIL() << "a tensor on cuda:0 was made without a backend";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0 is not available"), std::string::npos) << e.what();
  }
  set_device_memory(Device::Kind::kCUDA, nullptr, "no CUDA-capable device is detected");
  try {
    Tensor t = ones({4});
    t.to(Device::cuda(0));
    FAIL() << "to(cuda:0) worked without a backend";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA-capable device is detected"), std::string::npos)
        << e.what();
  }
  set_device_memory(Device::Kind::kCUDA, nullptr);
  EXPECT_THROW(set_device_memory(Device::Kind::kCPU, nullptr), InvalidArgument);
}

TEST_F(DeviceMemoryTest, ToTheDeviceAndBackKeepsValuesShapeAndDtype) {
  Tensor host = empty({3, 5}, DType::f32);
  float* p = host.data<float>();
  for (int i = 0; i < 15; ++i) p[i] = float(i) * 0.5f - 3.f;
  Tensor dev = host.to(Device::cuda(0));
  EXPECT_EQ(dev.device(), Device::cuda(0));
  EXPECT_EQ(dev.shape(), host.shape());
  Tensor back = dev.to(Device::cpu());
  EXPECT_TRUE(back.device().is_cpu());
  EXPECT_EQ(back.to_vector<float>(), host.to_vector<float>());
  EXPECT_TRUE(dev.to(Device::cuda(0)).same(dev)) << "to() the device a tensor is on copies nothing";
}

// The host cannot write device memory: zeros() there asks the backend (a host memset of a real
// GPU's pointer crashed the first optimizer step on an H200).
TEST_F(DeviceMemoryTest, ZerosOnADeviceAreSetByTheBackendNotTheHost) {
  Tensor dirty = full({6, 7}, 3.0, DType::f32).to(Device::cuda(0));
  dirty = Tensor();  // its block goes back to the cache, still holding 3s
  Tensor z = zeros({6, 7}, DType::f32, Device::cuda(0));
  EXPECT_EQ(device_.zeroes, 1);
  EXPECT_EQ(z.to(Device::cpu()).to_vector<float>(), std::vector<float>(42, 0.f));
  Tensor host = zeros({5});
  EXPECT_EQ(device_.zeroes, 1) << "a CPU tensor is zeroed on the host";
}

TEST_F(DeviceMemoryTest, AHostViewIsGatheredBeforeItGoesToTheDevice) {
  Tensor host = empty({4, 6}, DType::f32);
  for (int i = 0; i < 24; ++i) host.data<float>()[i] = float(i);
  Tensor column_view = host.as_strided({4, 2}, {6, 1}, 2);  // columns 2 and 3
  Tensor back = column_view.to(Device::cuda(0)).to(Device::cpu());
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{2, 3, 8, 9, 14, 15, 20, 21}));
}

TEST_F(DeviceMemoryTest, CopiesBetweenDevicesKeepTheDtypeAndGatherViewsOnTheDevice) {
  Tensor dev = zeros({4}, DType::f32, Device::cuda(0));
  try {
    dev.copy_(ones({4}, DType::f64));
    FAIL() << "an f64 -> f32 copy across devices converted silently";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("keeps the dtype"), std::string::npos) << e.what();
  }
  // A strided view on the device is gathered there, then copied.
  Tensor host = empty({2, 4});
  for (int i = 0; i < 8; ++i) host.data<float>()[i] = float(i);
  Tensor strided = host.to(Device::cuda(0)).as_strided({2, 2}, {4, 2}, 1);  // columns 1 and 3
  EXPECT_EQ(strided.to(Device::cpu()).to_vector<float>(), (std::vector<float>{1, 3, 5, 7}));
  EXPECT_EQ(device_.gathers, 1);
  // A strided destination on the device is scattered into there (a slice's backward).
  Tensor whole = zeros({2, 4}, DType::f32, Device::cuda(0));
  whole.as_strided({2, 2}, {4, 2}, 0).copy_(ones({2, 2}).to(Device::cuda(0)));
  EXPECT_EQ(whole.to(Device::cpu()).to_vector<float>(),
            (std::vector<float>{1, 0, 1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(device_.scatters, 1);
  // From the host into a device view: the bytes land contiguous on the device, then scatter.
  whole.as_strided({2, 2}, {4, 2}, 1).copy_(full({2, 2}, 2.0));
  EXPECT_EQ(whole.to(Device::cpu()).to_vector<float>(),
            (std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2}));
  dev.fill_(2.5);
  EXPECT_EQ(dev.to_vector<float>(), std::vector<float>(4, 2.5f));
}

TEST_F(DeviceMemoryTest, DeviceBytesComeFromTheBackendNotTheHostAllocator) {
  const uint64_t host_before = CpuAllocator::instance().usage().total;
  {
    Tensor dev = empty({1024}, DType::f32, Device::cuda(0));
    EXPECT_EQ(device_.stats(0).bytes_in_use, CpuAllocator::round_size(4096));
    EXPECT_EQ(CpuAllocator::instance().usage().total, host_before);
    tag_memory(dev, MemoryKind::kParameters);  // counted by the device, not moved on the host
    EXPECT_EQ(CpuAllocator::instance().usage().total, host_before);
  }
  EXPECT_EQ(device_.stats(0).bytes_in_use, 0u);
}

TEST_F(DeviceMemoryTest, AStepThatAllocatesTheSameSizesReusesItsBlocks) {
  for (int step = 0; step < 5; ++step) {
    Tensor a = empty({256, 128}, DType::f32, Device::cuda(0));
    Tensor b = empty({128}, DType::f32, Device::cuda(0));
    Tensor c = empty({256, 64}, DType::f32, Device::cuda(0));
  }
  EXPECT_EQ(device_.stats(0).system_allocs, 3u) << "only the first step reaches the system";
  EXPECT_EQ(device_.stats(0).cache_hits, 12u);
}

TEST_F(DeviceMemoryTest, AReleasedStorageGoesBackToTheDeviceAndComesBack) {
  Tensor dev = ones({64}, DType::f32).to(Device::cuda(0));
  dev.impl().storage->release();
  EXPECT_EQ(device_.stats(0).bytes_in_use, 0u);
  dev.impl().storage->reacquire();
  EXPECT_EQ(device_.stats(0).bytes_in_use, CpuAllocator::round_size(256));
}

TEST(BlockCache, KeepsBlocksBySizeUpToItsCap) {
  BlockCache cache(1000);
  int a = 0, b = 0, c = 0;
  EXPECT_EQ(cache.take(64), nullptr);
  EXPECT_TRUE(cache.put(&a, 512));
  EXPECT_TRUE(cache.put(&b, 64));
  EXPECT_FALSE(cache.put(&c, 512)) << "past the cap of 1000 bytes";
  EXPECT_EQ(cache.bytes_cached(), 576u);
  EXPECT_EQ(cache.take(512), &a);
  EXPECT_EQ(cache.take(512), nullptr);
  int drained = 0;
  cache.drain([&](void* p, size_t size) {
    EXPECT_EQ(p, &b);
    EXPECT_EQ(size, 64u);
    ++drained;
  });
  EXPECT_EQ(drained, 1);
  EXPECT_EQ(cache.bytes_cached(), 0u);
}

}  // namespace
}  // namespace cohort
