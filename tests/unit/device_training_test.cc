// Training on a device other than the CPU, end to end, on a stand-in GPU (host memory and the
// CPU's kernels registered as cuda:0's: tests/support/stand_in_device.h). Every op must make its
// outputs on its inputs' device, backward must keep gradients there, the module and optimizer
// state must move with the parameters; and since the same kernels run, the result must equal the
// CPU's bit for bit. The real GPU runs the same code with kernels/cuda (tests/cuda/gpu/).
#include <gtest/gtest.h>

#include "cohort/nn/loss.h"
#include "cohort/nn/models/cnn.h"
#include "cohort/nn/models/gpt.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/ops/ops.h"
#include "cohort/optim/adamw.h"
#include "cohort/optim/clip.h"
#include "cohort/optim/sgd.h"
#include "cohort/train/config/train_config.h"
#include "cohort/train/trainer.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/stand_in_device.h"

namespace cohort {
namespace {

const Device kGpu = Device::cuda(0);

// Every parameter of `model`, read back to the host, in order.
std::vector<std::vector<float>> host_values(const nn::Module& model) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor host = p.to(Device::cpu());
    out.push_back(host.to_vector<float>());
  }
  return out;
}

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
  for (const auto& [name, p] : model.named_parameters()) EXPECT_EQ(p.device(), device) << name;
  return host_values(model);
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

// A small GPT (embeddings, layer norm, fused causal attention over strided q/k/v views, GELU,
// dropout, the tied head) trains on the device as on the CPU: every view the model takes is
// gathered on the device where it must be contiguous.
std::vector<std::vector<float>> train_gpt(Device device, int steps) {
  nn::GPT model({.vocab_size = 32,
                 .n_layer = 2,
                 .n_head = 2,
                 .n_embd = 16,
                 .block_size = 8,
                 .dropout = 0.1,
                 .seed = 5});
  model.to(device);
  optim::AdamW opt(model.named_parameters(), {.lr = 1e-2});
  for (int step = 0; step < steps; ++step) {
    Tensor idx = empty({4, 8}, DType::i64), next = empty({32}, DType::i64);
    for (int i = 0; i < 32; ++i) {
      idx.data<int64_t>()[i] = (i * 5 + step) % 32;
      next.data<int64_t>()[i] = (i * 5 + step + 1) % 32;
    }
    Tensor logits = model(idx.to(device));
    Tensor loss = ops::cross_entropy(logits.reshape({32, 32}), next.to(device));
    model.zero_grad();
    loss.backward();
    opt.step();
  }
  std::vector<std::vector<float>> out = host_values(model);
  // Sampling reads the last position's logits back (greedy and top-k with a fixed seed).
  const auto greedy = model.generate_tokens({1, 2, 3}, {.max_new_tokens = 6, .temperature = 0.0});
  const auto sampled = model.generate_tokens({4}, {.max_new_tokens = 6, .top_k = 5});
  out.emplace_back(greedy.begin(), greedy.end());
  out.emplace_back(sampled.begin(), sampled.end());
  return out;
}

TEST(DeviceTraining, AGptTrainsOnTheDeviceAsOnTheCpu) {
  testing::StandInGpu gpu;
  EXPECT_EQ(train_gpt(kGpu, 5), train_gpt(Device::cpu(), 5));
  EXPECT_GT(gpu.memory.gathers, 0) << "the attention's views were made contiguous on the device";
}

// `cohort train` with run.device = "cuda": the trainer moves the model and every batch to the
// device, evaluates there, and writes a checkpoint the CPU reads; the run equals the CPU's.
std::vector<std::string> small_job(const std::string& name, const std::string& device) {
  return {
      "data.dataset=synthetic", "data.synthetic_samples=256",
      "data.batch_size=32",     "model.hidden=[32]",
      "train.max_steps=12",     "optim.momentum=0.9",
      "run.threads=1",          "run.progress=none",
      "ckpt.async=false",       "run.device=" + device,
      "run.name=" + name,       "run.dir=" + testing::fresh_dir("cohort_device_", name).string()};
}

TEST(DeviceTraining, CohortTrainOnTheDeviceMatchesTheCpuAndItsCheckpointLoadsOnTheCpu) {
  testing::StandInGpu gpu;
  train::Trainer on_cpu(train::load_config("/dev/null", small_job("cpu", "cpu")));
  const train::TrainSummary cpu_sum = on_cpu.run();
  train::Trainer on_gpu(train::load_config("/dev/null", small_job("gpu", "cuda")));
  const train::TrainSummary gpu_sum = on_gpu.run();
  EXPECT_EQ(gpu_sum.eval.loss, cpu_sum.eval.loss);
  EXPECT_EQ(gpu_sum.eval.accuracy, cpu_sum.eval.accuracy);
  // The summary reports the device's memory beside the host's kinds.
  const nlohmann::json summary =
      testing::last_record(std::filesystem::path(gpu_sum.run_dir) / "metrics.jsonl", "summary");
  EXPECT_EQ(summary.value("device", ""), "cuda:0");
  EXPECT_TRUE(summary.contains("device_memory_peak_bytes")) << summary.dump();
  EXPECT_FALSE(
      testing::last_record(std::filesystem::path(cpu_sum.run_dir) / "metrics.jsonl", "summary")
          .contains("device"));
  const NamedTensors gpu_params = on_gpu.model().named_parameters();
  for (size_t i = 0; i < gpu_params.size(); ++i) {
    EXPECT_EQ(gpu_params[i].second.device(), kGpu) << gpu_params[i].first;
    const Tensor host = gpu_params[i].second.to(Device::cpu());
    EXPECT_EQ(host.to_vector<float>(),
              on_cpu.model().named_parameters()[i].second.to_vector<float>())
        << gpu_params[i].first;
  }
  // The GPU run's newest checkpoint resumes on the CPU, and the steps after it give what the
  // CPU run resumed from its own gives.
  auto resumed = [](const std::string& run_dir, const std::string& name,
                    const std::string& device) {
    std::vector<std::string> job = small_job(name, device);
    job.push_back("train.max_steps=24");
    job.push_back("run.resume=" + testing::newest_checkpoint(run_dir).string());
    train::Trainer t(train::load_config("/dev/null", job));
    return t.run().eval.loss;
  };
  EXPECT_EQ(resumed(gpu_sum.run_dir, "from_gpu", "cpu"),
            resumed(cpu_sum.run_dir, "from_cpu", "cpu"));
  // And the CPU run's resumes on the device (optimizer state made there).
  EXPECT_EQ(resumed(cpu_sum.run_dir, "onto_gpu", "cuda"), resumed(cpu_sum.run_dir, "again", "cpu"));
}

TEST(DeviceTraining, CudaWithoutABackendOrWithSeveralWorkersIsAConfigError) {
  try {
    train::Trainer t(train::load_config("/dev/null", small_job("nogpu", "cuda")));
    FAIL() << "run.device = cuda trained without a GPU";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("run.device = \"cuda\""), std::string::npos) << e.what();
  }
  EXPECT_THROW(train::load_config("/dev/null", {"run.device=tpu"}), InvalidArgument);
}

// A strategy that communicates from host memory (ZeRO runs its own code even for one worker)
// is refused on the device, naming it, rather than reading device memory on the host.
TEST(DeviceTraining, AStrategyThatCommunicatesIsRefusedOnTheDevice) {
  testing::StandInGpu gpu;
  std::vector<std::string> job = small_job("zero", "cuda");
  job.push_back("parallel.strategy=zero");
  try {
    train::Trainer t(train::load_config("/dev/null", job));
    FAIL() << "ZeRO ran on the device";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.strategy = 'zero'"), std::string::npos)
        << e.what();
  }
}

TEST(DeviceTraining, TheGpt2SmallExampleAsksForTheGpu) {
  const Config cfg =
      train::load_config(std::string(COHORT_SOURCE_DIR) + "/examples/gpt2_small.toml", {});
  EXPECT_EQ(cfg.get_string("run.device"), "cuda");
  EXPECT_EQ(cfg.get_int("model.n_layer"), 12);
  EXPECT_EQ(cfg.get_int("model.n_embd"), 768);
  EXPECT_EQ(cfg.get_int("model.block_size"), 1024);
  EXPECT_EQ(cfg.get_string("train.precision"), "bf16");
}

// clip_grad_norm on a device sums every gradient's squares there and reads them back once; the
// norm is the CPU's up to summation order, and the gradients are scaled alike.
TEST(DeviceTraining, ClipGradNormOnTheDeviceReadsTheNormOnceAndScalesLikeTheCpu) {
  testing::StandInGpu gpu;
  int clip_copies = 0;  // host <-> device copies made by clip_grad_norm itself
  auto grads_after_clip = [&](Device d, double* norm) {
    nn::MLP model({20, 32, 5}, {.seed = 7});
    model.to(d);
    auto [x, y] = batch(0);
    ops::cross_entropy(model(x.to(d)), y.to(d)).backward();
    std::vector<Tensor> params;
    for (const auto& [name, p] : model.named_parameters()) params.push_back(p);
    const int before = gpu.memory.copies;
    *norm = optim::clip_grad_norm(params, 0.01);
    clip_copies = gpu.memory.copies - before;
    std::vector<std::vector<float>> out;
    for (const Tensor& p : params) out.push_back(p.grad().to(Device::cpu()).to_vector<float>());
    return out;
  };
  double cpu_norm = 0, gpu_norm = 0;
  const auto on_cpu = grads_after_clip(Device::cpu(), &cpu_norm);
  const auto on_gpu = grads_after_clip(kGpu, &gpu_norm);
  EXPECT_EQ(clip_copies, 1) << "one read of the four gradients' sums";
  EXPECT_NEAR(gpu_norm, cpu_norm, 1e-5 * cpu_norm);
  EXPECT_GT(cpu_norm, 0.01) << "the test must clip";
  for (size_t t = 0; t < on_cpu.size(); ++t)
    for (size_t i = 0; i < on_cpu[t].size(); ++i)
      ASSERT_NEAR(on_gpu[t][i], on_cpu[t][i], 1e-5f * (std::fabs(on_cpu[t][i]) + 1e-6f));
}

// On a device the optimizers update all parameters at the same step as one list (one
// multi-tensor launch on a GPU, not one per parameter), with the CPU's results.
int g_list_calls = 0;
size_t g_list_size = 0;

TEST(DeviceTraining, OptimizersUpdateTheDeviceParametersAsOneList) {
  testing::StandInGpu gpu;
  dispatch::KernelTable counting = dispatch::cpu_table();
  counting.adamw_update = [](Device d, std::span<const cpu::AdamWParam> list,
                             const cpu::AdamScalars& s) {
    ++g_list_calls, g_list_size = list.size();
    dispatch::cpu_table().adamw_update(d, list, s);
  };
  counting.sgd_update = [](Device d, std::span<const cpu::SgdParam> list, const cpu::SgdScalars& s,
                           cpu::SgdPhase phase, bool nesterov) {
    ++g_list_calls, g_list_size = list.size();
    dispatch::cpu_table().sgd_update(d, list, s, phase, nesterov);
  };
  dispatch::set_kernel_table(Device::Kind::kCUDA, &counting);
  auto adamw = [](NamedTensors p) {
    return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 1e-2});
  };
  auto sgd = [](NamedTensors p) {
    return std::make_unique<optim::SGD>(p, optim::SgdOptions{.lr = 0.1, .momentum = 0.9});
  };
  g_list_calls = 0;
  EXPECT_EQ(train(kGpu, 3, adamw), train(Device::cpu(), 3, adamw));
  EXPECT_EQ(g_list_calls, 3) << "one list per step";
  EXPECT_EQ(g_list_size, 4u) << "the MLP's two weights and two biases";
  g_list_calls = 0;
  EXPECT_EQ(train(kGpu, 3, sgd), train(Device::cpu(), 3, sgd));
  EXPECT_EQ(g_list_calls, 3) << "the first step (momentum buffers start) and two more";
  dispatch::set_kernel_table(Device::Kind::kCUDA, &dispatch::cpu_table());  // StandInGpu's
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
  dispatch::KernelTable partial = dispatch::cpu_table();  // a device that lacks one kernel
  partial.max_pool2d_forward = nullptr;
  dispatch::set_kernel_table(Device::Kind::kCUDA, &partial);
  Tensor x = ones({1, 1, 4, 4}).to(kGpu);
  try {
    ops::max_pool2d(x, 2);
    FAIL() << "max_pool2d ran on cuda:0 without a kernel";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("max_pool2d has no kernel on cuda:0"), std::string::npos)
        << e.what();
  }
}

// The CNN (conv2d, max_pool2d, linear) on the device as on the CPU.
TEST(DeviceTraining, ACnnTrainsOnTheDeviceAsOnTheCpu) {
  testing::StandInGpu gpu;
  auto train_cnn = [](Device device) {
    nn::CNN model({.seed = 2});
    model.to(device);
    optim::SGD opt(model.named_parameters(), {.lr = 0.05, .momentum = 0.9});
    for (int step = 0; step < 3; ++step) {
      Tensor images = randn({16, 1, 28, 28}, uint64_t(200 + step));
      Tensor labels = empty({16}, DType::i64);
      for (int i = 0; i < 16; ++i) labels.data<int64_t>()[i] = (i + step) % 10;
      Tensor loss = ops::cross_entropy(model(images.to(device)), labels.to(device));
      model.zero_grad();
      loss.backward();
      opt.step();
    }
    return host_values(model);
  };
  EXPECT_EQ(train_cnn(kGpu), train_cnn(Device::cpu()));
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
