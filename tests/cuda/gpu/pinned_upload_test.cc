// Uploads through page-locked staging buffers on the GPU's copy stream (DeviceMemory::upload_async,
// device/pinned_uploads.h), as the trainer uses them for the next step's batch: the staging
// buffers are reused, the bytes arrive, a kernel queued after device_wait() sees them (the
// compute stream waits for the copy's event), a copy never writes into a block that a kernel
// queued before it still reads, nor lands after a dropped upload's block was reused; and the copy
// overlaps a kernel (timings printed as "[ pinned ]" lines, not asserted). Skipped without a GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "cohort/device/cuda_memory.h"
#include "cohort/ops/ops.h"
#include "cohort/tensor/device_memory.h"
#include "cohort/tensor/tensor.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::device {
namespace {

const Device kGpu = Device::cuda(0);
using Clock = std::chrono::steady_clock;

// A device tensor and the upload into it: members go in reverse order, the upload's handle
// first (the GPU's stream waits for the copy), then the tensor's block (batch_prefetch.cc's rule).
struct Uploaded {
  Tensor dev;
  std::unique_ptr<PendingUpload> pending;
};

Uploaded upload(const Tensor& host) {
  Uploaded u{empty(host.shape(), host.dtype(), kGpu), nullptr};
  u.pending = device_memory(kGpu).upload_async(0, u.dev.raw_data(), host.raw_data(), host.nbytes());
  return u;
}

// n floats, element i = (i % 4093) - 2000 plus `shift`: cheap to make, easy to tell apart.
Tensor pattern(int64_t n, float shift) {
  Tensor t = empty({n}, DType::f32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = float(i % 4093) - 2000.f + shift;
  return t;
}

void synchronize_gpu() {
  COHORT_CUDA_CHECK(cudaStreamSynchronize(cuda_stream(0)));
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

TEST(CudaPinned, AnUploadBringsTheSameBytesAndKeepsTheDtype) {
  COHORT_REQUIRE_GPU();
  ASSERT_TRUE(enable_cuda());
  const auto values = cuda::testing::random_floats(10007, 3);
  Tensor x = empty({int64_t(values.size())}, DType::f32);
  std::copy(values.begin(), values.end(), x.data<float>());
  Tensor y = empty({37}, DType::i64);
  for (int i = 0; i < 37; ++i) y.data<int64_t>()[i] = int64_t(i) * 1000003 - 5;
  Uploaded ux = upload(x), uy = upload(y);
  x = Tensor();  // the host source may go once upload_async returned (it was staged)
  ux.pending->device_wait();
  uy.pending->device_wait();
  EXPECT_EQ(ux.dev.to(Device::cpu()).to_vector<float>(), values);
  EXPECT_EQ(uy.dev.to(Device::cpu()).to_vector<int64_t>(), y.to_vector<int64_t>());
  Uploaded none = upload(empty({0}, DType::f32));
  none.pending->device_wait();  // nothing to copy, nothing to wait for
}

// The trainer's pattern: step s+1's x and y upload while step s, uploaded before, computes.
TEST(CudaPinned, StagingBuffersAreReusedAfterTheFirstSteps) {
  COHORT_REQUIRE_GPU();
  ASSERT_TRUE(enable_cuda());
  const Tensor x = pattern(64 * 784, 0), y = empty({64}, DType::i64);
  const std::vector<float> twice = ops::mul_scalar(x, 2.0).to_vector<float>();
  for (int i = 0; i < 64; ++i) y.data<int64_t>()[i] = i % 10;
  const uint64_t before = cuda_memory_stats(0).pinned_allocs;
  uint64_t after_warmup = 0;
  std::unique_ptr<Uploaded> held_x, held_y;
  for (int step = 0; step < 30; ++step) {
    auto next_x = std::make_unique<Uploaded>(upload(x));
    auto next_y = std::make_unique<Uploaded>(upload(y));
    if (held_x) {
      held_x->pending->device_wait();
      held_y->pending->device_wait();
      const Tensor doubled = ops::mul_scalar(held_x->dev, 2.0);  // the step's kernel
      EXPECT_EQ(doubled.to(Device::cpu()).to_vector<float>(), twice) << "step " << step;
    }
    held_x = std::move(next_x);
    held_y = std::move(next_y);
    if (step == 4) after_warmup = cuda_memory_stats(0).pinned_allocs;
  }
  const uint64_t total = cuda_memory_stats(0).pinned_allocs;
  EXPECT_EQ(total, after_warmup) << "a staging buffer was allocated after step 4";
  EXPECT_LE(total - before, 8u) << "two steps of x and y need about four buffers";
  std::printf(
      "[ pinned ] staging buffers allocated over 30 steps of x and y: %llu (%llu after 5 steps)\n",
      (unsigned long long)(total - before), (unsigned long long)(after_warmup - before));
}

// 128 MiB copied, then a kernel queued right after device_wait(): it must read every copied
// element. The block was zeros before (a freed tensor's, reused), so a kernel that ran ahead of
// the copy would read zeros.
TEST(CudaPinned, AKernelQueuedAfterDeviceWaitSeesTheUpload) {
  COHORT_REQUIRE_GPU();
  ASSERT_TRUE(enable_cuda());
  const int64_t n = int64_t{32} << 20;
  const Tensor host = pattern(n, 0.5f);
  zeros({n}, DType::f32, kGpu);  // its block goes back to the cache, holding zeros
  Uploaded u = upload(host);
  u.pending->device_wait();
  const std::vector<float> doubled = ops::add(u.dev, u.dev).to(Device::cpu()).to_vector<float>();
  const float* h = host.data<float>();
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < n; ++i)
    if (doubled[size_t(i)] != 2 * h[i] && wrong++ == 0) first = i;
  EXPECT_EQ(wrong, 0) << "elements the kernel read before the copy landed; first at " << first;
}

// A kernel reads block B (queued behind a long matmul, so it has not run yet); B is freed and an
// upload takes it from the cache: the copy must wait for that kernel (the copy stream waits for
// the compute stream's position when the upload starts).
TEST(CudaPinned, ACopyWaitsForTheKernelsQueuedBeforeItOnItsBlock) {
  COHORT_REQUIRE_GPU();
  ASSERT_TRUE(enable_cuda());
  const int64_t n = int64_t{8} << 20;
  Tensor a = pattern(n, 0.25f).to(kGpu);
  const void* block = a.raw_data();
  const Tensor big = zeros({4096, 4096}, DType::f32, kGpu);
  Tensor busy = ops::matmul(ops::matmul(big, big), big);  // keeps the stream busy a while
  const Tensor read = ops::mul_scalar(a, 2.0);            // queued behind it, reads B
  a = Tensor();                                           // B back to the cache
  Uploaded u = upload(pattern(n, 7.0f));
  EXPECT_EQ(u.dev.raw_data(), block) << "the cache did not hand B back: this test checked nothing";
  u.pending->device_wait();
  const Tensor want = pattern(n, 0.25f);
  EXPECT_EQ(read.to(Device::cpu()).to_vector<float>(),
            ops::mul_scalar(want, 2.0).to_vector<float>())
      << "the upload overwrote B before the kernel queued earlier read it";
  EXPECT_EQ(u.dev.to(Device::cpu()).to_vector<float>(), pattern(n, 7.0f).to_vector<float>());
}

// An upload dropped without device_wait() (a step the trainer fetched ahead and never ran): its
// handle's destruction orders the block's next use after the copy, so a memset queued on the
// reused block is not overwritten by the late copy.
TEST(CudaPinned, ADroppedUploadLandsBeforeItsBlockIsReused) {
  COHORT_REQUIRE_GPU();
  ASSERT_TRUE(enable_cuda());
  const int64_t n = int64_t{32} << 20;
  const Tensor host = pattern(n, 1.0f);
  const void* block = nullptr;
  {
    Uploaded u = upload(host);
    block = u.dev.raw_data();
  }  // the handle goes first, then the block
  const Tensor z = zeros({n}, DType::f32, kGpu);
  EXPECT_EQ(z.raw_data(), block)
      << "the cache did not hand the block back: this test checked nothing";
  const std::vector<float> got = z.to(Device::cpu()).to_vector<float>();
  EXPECT_EQ(std::count(got.begin(), got.end(), 0.f), n)
      << "the dropped upload landed after the memset";
}

// Times `f` (which queues GPU work) until the GPU's stream is idle, after one warm-up call.
template <typename F>
double timed_ms(F f) {
  f();
  synchronize_gpu();
  const auto t0 = Clock::now();
  f();
  synchronize_gpu();
  return ms_since(t0);
}

// The copy overlaps a kernel: an upload started before a long matmul is queued runs beside it.
// Printed, not asserted (a shared machine's timings vary); correctness is the tests above.
TEST(CudaPinned, TheCopyOverlapsTheKernels) {
  COHORT_REQUIRE_GPU();
  ASSERT_TRUE(enable_cuda());
  const int64_t n = int64_t{16} << 20;  // 64 MiB
  const Tensor host = pattern(n, 2.0f);
  const Tensor a = zeros({4096, 4096}, DType::f32, kGpu);
  auto kernels = [&] {
    Tensor c = a;
    for (int i = 0; i < 4; ++i) c = ops::matmul(c, a);
  };
  auto pinned = [&] {
    Uploaded u = upload(host);
    u.pending->device_wait();
  };
  double staging_ms = 0;
  auto overlapped = [&] {
    const auto t0 = Clock::now();
    Uploaded u = upload(host);  // returns once staged: the copy runs on the copy stream
    staging_ms = ms_since(t0);
    kernels();
    u.pending->device_wait();
  };
  const double kernel_ms = timed_ms(kernels);
  const double pageable_ms = timed_ms([&] { host.to(kGpu); });
  const double pinned_ms = timed_ms(pinned);
  const double serial_ms = timed_ms([&] {
    kernels();
    synchronize_gpu();
    pinned();
  });
  const double overlapped_ms = timed_ms(overlapped);
  std::printf(
      "[ pinned ] 64 MiB host->device: pageable copy %.2f ms, pinned upload %.2f ms (host staging "
      "%.2f ms); 4 matmuls 4096^3 %.2f ms; both serial %.2f ms, overlapped %.2f ms (%.2f ms "
      "hidden)\n",
      pageable_ms, pinned_ms, staging_ms, kernel_ms, serial_ms, overlapped_ms,
      serial_ms - overlapped_ms);
  Uploaded check = upload(host);
  check.pending->device_wait();
  EXPECT_EQ(check.dev.to(Device::cpu()).to_vector<float>(), host.to_vector<float>());
}

}  // namespace
}  // namespace cohort::device
