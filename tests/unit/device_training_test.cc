// Training on a device other than the CPU, end to end, on a stand-in GPU (host memory and the
// CPU's kernels registered as cuda:0's: tests/support/stand_in_device.h). Every op must make its
// outputs on its inputs' device, backward must keep gradients there, the module and optimizer
// state must move with the parameters; and since the same kernels run, the result must equal the
// CPU's bit for bit. The real GPU runs the same code with kernels/cuda (tests/cuda/gpu/).
#include <gtest/gtest.h>

#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/ops/ops.h"
#include "cohort/optim/adamw.h"
#include "cohort/optim/sgd.h"
#include "tests/support/stand_in_device.h"

namespace cohort {
namespace {

const Device kGpu = Device::cuda(0);

// A batch of 16 inputs of 20 features and their labels in [0, 5), the same on every call.
std::pair<Tensor, Tensor> batch(int step) {
  Tensor x = randn({16, 20}, uint64_t(100 + step));
  Tensor y = empty({16}, DType::i64);
  for (int i = 0; i < 16; ++i) y.data<int64_t>()[i] = (i * 7 + step) % 5;
  return {x, y};
}

// Trains a fresh MLP for `steps` on `device` and returns its parameters, on the CPU.
template <typename MakeOptimizer>
std::vector<std::vector<float>> train(Device device, int steps, MakeOptimizer make) {
  nn::MLP model({20, 32, 5}, {.seed = 7});
  model.to(device);
  auto opt = make(model.named_parameters());
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = batch(step);
    Tensor loss = ops::cross_entropy(model(x.to(device)), y.to(device));
    EXPECT_EQ(loss.device(), device);
    model.zero_grad();
    loss.backward();
    opt->step();
  }
  std::vector<std::vector<float>> out;
  for (const auto& [name, p] : model.named_parameters()) {
    EXPECT_EQ(p.device(), device) << name;
    const Tensor host = p.to(Device::cpu());
    out.push_back(host.to_vector<float>());
  }
  return out;
}

TEST(DeviceTraining, AnMlpWithSgdMomentumTrainsOnTheDeviceAsOnTheCpu) {
  testing::StandInGpu gpu;
  auto sgd = [](nn::NamedTensors params) {
    return std::make_unique<optim::SGD>(
        params,
        optim::SgdOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-4});
  };
  const auto on_cpu = train(Device::cpu(), 10, sgd);
  const auto on_gpu = train(kGpu, 10, sgd);
  EXPECT_EQ(on_gpu, on_cpu);
  EXPECT_GT(gpu.memory.stats(0).cache_hits, 0u) << "steps after the first reuse blocks";
}

TEST(DeviceTraining, AnMlpWithAdamwTrainsOnTheDeviceAsOnTheCpu) {
  testing::StandInGpu gpu;
  auto adamw = [](nn::NamedTensors params) {
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = 1e-2});
  };
  EXPECT_EQ(train(kGpu, 10, adamw), train(Device::cpu(), 10, adamw));
}

TEST(DeviceTraining, MixingDevicesInAnOpNamesBoth) {
  testing::StandInGpu gpu;
  Tensor a = ones({3}).to(kGpu), b = ones({3});
  try {
    ops::add(a, b);
    FAIL() << "an op ran on tensors of two devices";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda:0"), std::string::npos) << what;
    EXPECT_NE(what.find("cpu"), std::string::npos) << what;
  }
}

TEST(DeviceTraining, AnOpWithoutADeviceKernelSaysSoInsteadOfRunningOnDeviceMemory) {
  testing::StandInGpu gpu;
  Tensor x = ones({1, 1, 4, 4}).to(kGpu);
  try {
    ops::max_pool2d(x, 2);
    FAIL() << "max_pool2d ran on cuda:0";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("max_pool2d has no kernel on cuda:0"), std::string::npos)
        << e.what();
  }
}

TEST(DeviceTraining, MovingAModuleToADeviceWithoutABackendMovesNothing) {
  nn::MLP model({4, 3}, {.seed = 1});
  const auto before = model.named_parameters()[0].second.to_vector<float>();
  EXPECT_THROW(model.to(kGpu), InvalidArgument);
  for (const auto& [name, p] : model.named_parameters()) EXPECT_TRUE(p.device().is_cpu()) << name;
  EXPECT_EQ(model.named_parameters()[0].second.to_vector<float>(), before);
}

}  // namespace
}  // namespace cohort
