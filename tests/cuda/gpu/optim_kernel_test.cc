// kernels/cuda/optim (fused multi-tensor AdamW and SGD) against cohort's CPU optimizers: several
// tensors of odd sizes, ten steps. The launch planning is host code and is checked everywhere.
#include "cohort/kernels/cuda/optim.h"

#include <set>
#include <utility>

#include "cohort/optim/adamw.h"
#include "cohort/optim/sgd.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::cuda {
namespace {

using testing::all_close;
using testing::random_floats;

constexpr int kSteps = 10;
// Odd sizes: one element, less than a warp, several chunks with a ragged tail, and empty.
const std::vector<int64_t> kSizes = {1, 7, 1000, 65537, 200003, 3, 0};

// The tensors on both sides: CPU tensors for cohort's optimizer, device arrays for the kernel
// (param, grad and up to two state arrays, zero like the CPU optimizer's fresh state).
struct Tensors {
  std::vector<Tensor> cpu;
  std::vector<std::unique_ptr<DeviceArray<float>>> param, grad, s1, s2;

  explicit Tensors(const std::vector<int64_t>& sizes) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto init = random_floats(sizes[i], 30 + uint32_t(i));
      cpu.push_back(from_vector(init, {sizes[i]}).set_requires_grad(true));
      param.push_back(std::make_unique<DeviceArray<float>>(std::span<const float>(init)));
      grad.push_back(std::make_unique<DeviceArray<float>>(sizes[i]));
      const std::vector<float> zeros(sizes[i], 0.f);
      s1.push_back(std::make_unique<DeviceArray<float>>(std::span<const float>(zeros)));
      s2.push_back(std::make_unique<DeviceArray<float>>(std::span<const float>(zeros)));
    }
  }
  // Step t's gradients, the same on both sides.
  void set_grads(int t) {
    for (size_t i = 0; i < cpu.size(); ++i) {
      const auto g = random_floats(cpu[i].numel(), 1000 * uint32_t(t) + uint32_t(i), -1.f, 1.f);
      cpu[i].set_grad(from_vector(g, cpu[i].shape()));
      grad[i]->upload(g);
    }
  }
  void expect_params_match(const char* what) const {
    for (size_t i = 0; i < cpu.size(); ++i)
      EXPECT_TRUE(all_close(param[i]->download(), cpu[i].to_vector<float>(), 1e-5f, 1e-6f))
          << what << ", tensor " << i << " of " << cpu[i].numel() << " elements";
  }
};

void run_adamw(const std::vector<int64_t>& sizes, int64_t chunk) {
  Tensors s(sizes);
  const optim::AdamWOptions o{.lr = 1e-2, .betas = {0.9, 0.999}, .eps = 1e-8, .weight_decay = 0.1};
  optim::AdamW cpu_opt(s.cpu, o);
  std::vector<AdamWTensor> list;
  for (size_t i = 0; i < sizes.size(); ++i)
    list.push_back(
        {s.param[i]->data(), s.grad[i]->data(), s.s1[i]->data(), s.s2[i]->data(), sizes[i]});
  for (int t = 0; t < kSteps; ++t) {
    s.set_grads(t);
    cpu_opt.step();
    adamw_multi_tensor(
        list,
        math::adamw_scalars(o.lr, o.betas.first, o.betas.second, o.eps, o.weight_decay, t + 1),
        nullptr, chunk);
  }
  COHORT_CUDA_CHECK(cudaDeviceSynchronize());
  s.expect_params_match(("AdamW, chunk " + std::to_string(chunk)).c_str());
}

TEST(CudaOptim, AdamWMatchesCohortsAdamWOnOddSizes) {
  COHORT_REQUIRE_GPU();
  run_adamw(kSizes, kDefaultChunk);
}

// A small chunk and many tensors: the list needs several launches, split both by tensor count
// and by block count, with tensors continuing across launches.
TEST(CudaOptim, AdamWAcrossSeveralLaunches) {
  COHORT_REQUIRE_GPU();
  std::vector<int64_t> sizes;
  for (int i = 0; i < 100; ++i) sizes.push_back((i * 37) % 500 + 1);
  sizes.push_back(50000);  // 782 chunks of 64: spans three launches by itself
  run_adamw(sizes, 64);
}

TEST(CudaOptim, SgdMatchesCohortsSgdInEveryMode) {
  COHORT_REQUIRE_GPU();
  const std::vector<optim::SgdOptions> cases = {
      {.lr = 0.1, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const optim::SgdOptions& o = cases[c];
    Tensors s(kSizes);
    optim::SGD cpu_opt(s.cpu, o);
    std::vector<SgdTensor> list;
    for (size_t i = 0; i < kSizes.size(); ++i)
      list.push_back({s.param[i]->data(), s.grad[i]->data(),
                      o.momentum != 0 ? s.s1[i]->data() : nullptr, kSizes[i]});
    const math::SgdScalars sc = math::sgd_scalars(o.lr, o.momentum, o.dampening, o.weight_decay);
    for (int t = 0; t < kSteps; ++t) {
      s.set_grads(t);
      cpu_opt.step();
      const math::SgdStep step = o.momentum == 0 ? math::SgdStep::kPlain
                                 : t == 0        ? math::SgdStep::kFirst
                                                 : math::SgdStep::kMomentum;
      sgd_multi_tensor(list, sc, step, o.nesterov, nullptr);
    }
    COHORT_CUDA_CHECK(cudaDeviceSynchronize());
    s.expect_params_match(("SGD case " + std::to_string(c)).c_str());
  }
}

TEST(CudaOptim, NullArraysAreInvalidArguments) {
  COHORT_REQUIRE_GPU();
  DeviceArray<float> d(8);
  const std::vector<SgdTensor> list = {{d.data(), d.data(), nullptr, 8}};
  EXPECT_THROW(sgd_multi_tensor(list, {}, math::SgdStep::kMomentum, false, nullptr),
               InvalidArgument);
  EXPECT_NO_THROW(sgd_multi_tensor(list, {}, math::SgdStep::kPlain, false, nullptr));
  COHORT_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- the launch plan: host code, no GPU needed ------------------------------------------------

TEST(MultiTensorPlan, ASmallListIsOneLaunch) {
  const auto plan = multi_tensor::plan(kSizes, multi_tensor::kMaxTensorsAdamW,
                                       multi_tensor::kMaxBlocks, kDefaultChunk);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].tensors.size(), 6u);  // the empty tensor has no chunk
  EXPECT_EQ(plan[0].blocks.size(), 1u + 1 + 1 + 2 + 4 + 1);
}

TEST(MultiTensorPlan, EveryChunkOnceWithinTheLimits) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < 300; ++i) sizes.push_back(i % 11 == 0 ? 0 : (i * 7919) % 3000 + 1);
  sizes.push_back(100000);
  for (int max_tensors : {1, 5, 36}) {
    const int64_t chunk = 64;
    const auto plan = multi_tensor::plan(sizes, max_tensors, 40, chunk);
    std::vector<std::pair<int, int64_t>> seen;
    for (const auto& l : plan) {
      ASSERT_LE(int(l.tensors.size()), max_tensors);
      ASSERT_LE(l.blocks.size(), 40u);
      ASSERT_FALSE(l.blocks.empty());
      for (const auto& b : l.blocks) seen.push_back({l.tensors.at(size_t(b.slot)), b.chunk});
    }
    std::vector<std::pair<int, int64_t>> want;  // every (tensor, chunk), in list order
    for (size_t i = 0; i < sizes.size(); ++i)
      for (int64_t c = 0; c * chunk < sizes[i]; ++c) want.push_back({int(i), c});
    EXPECT_EQ(seen, want) << "max_tensors " << max_tensors;
  }
}

}  // namespace
}  // namespace cohort::cuda
