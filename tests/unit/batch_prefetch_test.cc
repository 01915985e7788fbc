// The trainer's batches copied to the device ahead of their step (train/batch_prefetch.h,
// DeviceMemory::upload_async), on a stand-in GPU whose uploads land only when the device is told
// to wait (tests/support/stand_in_device.h): a step that read its batch before that would read
// stale bytes and train differently, and a batch freed before its upload landed fails the test.
// With the uploads, training must still equal the CPU's and the synchronous path's bit for bit.
#include "cohort/train/batch_prefetch.h"

#include <gtest/gtest.h>

#include <fstream>

#include "cohort/nn/models/mlp.h"
#include "cohort/ops/ops.h"
#include "cohort/optim/sgd.h"
#include "cohort/train/config/train_config.h"
#include "cohort/train/trainer.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/stand_in_device.h"

namespace cohort::train {
namespace {

const Device kGpu = Device::cuda(0);

// Step `step`: micro-batches of 16 inputs of 20 features and labels in [0, 5), on the host.
StepInput host_step(int step, int micro = 1) {
  StepInput in{.epoch = 0, .batch_index = step};
  for (int m = 0; m < micro; ++m) {
    Tensor x = randn({16, 20}, uint64_t(100 + step * 10 + m));
    Tensor y = empty({16}, DType::i64);
    for (int i = 0; i < 16; ++i) y.data<int64_t>()[i] = (i * 7 + step + m) % 5;
    in.micro.push_back({x, y});
  }
  return in;
}

TEST(BatchPrefetch, OnTheCpuOrWhenOffAStepPassesThroughUntouched) {
  testing::StandInGpu gpu;
  for (auto [device, enabled] : {std::pair{Device::cpu(), true}, std::pair{kGpu, false}}) {
    BatchPrefetch feed(device, enabled);
    EXPECT_FALSE(feed.uploads_ahead());
    const StepInput in = host_step(0);
    const std::optional<StepInput> out = feed.push(in);
    ASSERT_TRUE(out);
    EXPECT_TRUE(out->micro[0].x.same(in.micro[0].x)) << "no copy";
    EXPECT_FALSE(feed.flush());
  }
  EXPECT_EQ(gpu.memory.uploads, 0);
  EXPECT_EQ(gpu.memory.copies, 0);
}

TEST(BatchPrefetch, TheNextStepUploadsWhileTheOneBeforeIsHandedToTheDevice) {
  testing::StandInGpu gpu;
  BatchPrefetch feed(kGpu, true);
  ASSERT_TRUE(feed.uploads_ahead());
  EXPECT_FALSE(feed.push(host_step(0, 2))) << "the first step is held while it copies";
  EXPECT_EQ(gpu.memory.uploads, 4);
  EXPECT_EQ(gpu.memory.upload_waits, 0);
  const std::optional<StepInput> first = feed.push(host_step(1, 2));
  ASSERT_TRUE(first);
  EXPECT_EQ(gpu.memory.uploads, 8) << "step 1 started copying before step 0 was handed over";
  EXPECT_EQ(gpu.memory.upload_waits, 4) << "step 0's copies were waited for, step 1's not";
  const StepInput want = host_step(0, 2);
  ASSERT_EQ(first->micro.size(), 2u);
  for (size_t m = 0; m < 2; ++m) {
    EXPECT_EQ(first->micro[m].x.device(), kGpu);
    EXPECT_EQ(first->micro[m].y.dtype(), DType::i64);
    EXPECT_EQ(first->micro[m].x.to(Device::cpu()).to_vector<float>(),
              want.micro[m].x.to_vector<float>());
    EXPECT_EQ(first->micro[m].y.to(Device::cpu()).to_vector<int64_t>(),
              want.micro[m].y.to_vector<int64_t>());
  }
  const std::optional<StepInput> last = feed.flush();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->batch_index, 1);
  EXPECT_EQ(gpu.memory.upload_waits, 8);
  EXPECT_FALSE(feed.flush());
  EXPECT_EQ(gpu.memory.copies, 4) << "only the reads back above";
}

TEST(BatchPrefetch, AStepDroppedWhileCopyingIsWaitedForBeforeItsMemoryGoes) {
  testing::StandInGpu gpu;
  {
    BatchPrefetch feed(kGpu, true);
    feed.push(host_step(0));
    feed.push(host_step(1));  // step 0 handed over and dropped by the caller; step 1 held
  }  // the stand-in fails the test if a block goes back with its upload not landed
  EXPECT_EQ(gpu.memory.upload_waits, gpu.memory.uploads);
  EXPECT_EQ(gpu.memory.stats(0).bytes_in_use, 0u);
}

// A bad batch fails at its own step: the step before it is still handed over, and nothing of the
// bad step stays on the device.
TEST(BatchPrefetch, ABatchThatCannotBeUploadedFailsAtItsOwnTurn) {
  testing::StandInGpu gpu;
  BatchPrefetch feed(kGpu, true);
  feed.push(host_step(0));
  StepInput bad = host_step(1, 2);
  bad.micro[1].y = empty({15}, DType::i64);  // x holds 16 samples
  ASSERT_TRUE(feed.push(std::move(bad))) << "step 0 is trained first";
  try {
    feed.flush();
    FAIL() << "a batch with 16 inputs and 15 labels was uploaded";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("micro-batch 1 has x [16, 20] and y [15]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(feed.flush()) << "the failed step is gone";
  EXPECT_EQ(gpu.memory.upload_waits, gpu.memory.uploads);
  EXPECT_EQ(gpu.memory.stats(0).bytes_in_use, 0u);

  BatchPrefetch other(Device::cuda(1), true);  // a batch already on another device
  StepInput elsewhere = host_step(2);
  elsewhere.micro[0].x = elsewhere.micro[0].x.to(kGpu);
  other.push(std::move(elsewhere));
  try {
    other.flush();
    FAIL() << "a batch on cuda:0 was taken for cuda:1";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("x is on cuda:0, training runs on cuda:1"),
              std::string::npos)
        << e.what();
  }
}

// A hand-written loop: an MLP trained from prefetched batches equals the one trained from
// Tensor::to's and the CPU's, bit for bit.
std::vector<std::vector<float>> train_mlp(Device device, bool prefetch, int steps) {
  nn::MLP model({20, 32, 5}, {.seed = 7});
  model.to(device);
  optim::SGD opt(model.named_parameters(), {.lr = 0.05, .momentum = 0.9});
  BatchPrefetch feed(device, prefetch);
  auto train = [&](const std::optional<StepInput>& in) {
    if (!in) return;
    for (const data::Batch& b : in->micro) {
      Tensor loss = ops::cross_entropy(model(b.x.to(device)), b.y.to(device));
      model.zero_grad();
      loss.backward();
      opt.step();
    }
  };
  for (int step = 0; step < steps; ++step) train(feed.push(host_step(step, 2)));
  train(feed.flush());
  std::vector<std::vector<float>> out;
  for (const auto& [name, p] : model.named_parameters())
    out.push_back(p.to(Device::cpu()).to_vector<float>());
  return out;
}

TEST(BatchPrefetch, AnMlpTrainedFromPrefetchedBatchesEqualsTheSynchronousAndTheCpu) {
  testing::StandInGpu gpu;
  const auto on_cpu = train_mlp(Device::cpu(), true, 6);
  const auto synchronous = train_mlp(kGpu, false, 6);
  EXPECT_EQ(gpu.memory.uploads, 0);
  const auto prefetched = train_mlp(kGpu, true, 6);
  EXPECT_EQ(prefetched, on_cpu);
  EXPECT_EQ(prefetched, synchronous);
  EXPECT_EQ(gpu.memory.uploads, 6 * 2 * 2) << "6 steps of 2 micro-batches, x and y";
  EXPECT_EQ(gpu.memory.upload_waits, gpu.memory.uploads);
}

// `cohort train` with run.device = "cuda" on the stand-in, as device_training_test.cc's job.
std::vector<std::string> job(const std::string& name, const std::string& device,
                             std::vector<std::string> extra = {}) {
  std::vector<std::string> j = {"data.dataset=synthetic",
                                "data.synthetic_samples=256",
                                "data.batch_size=32",
                                "model.hidden=[32]",
                                "train.max_steps=12",
                                "train.epochs=3",
                                "optim.momentum=0.9",
                                "run.threads=1",
                                "run.progress=none",
                                "ckpt.async=false",
                                "run.device=" + device,
                                "run.name=" + name,
                                "run.dir=" + testing::fresh_dir("cohort_prefetch_", name).string()};
  j.insert(j.end(), extra.begin(), extra.end());
  return j;
}

struct RunResult {
  double eval_loss = 0;
  std::vector<std::vector<float>> params;
};

RunResult run_job(const std::vector<std::string>& j) {
  Trainer t(load_config("/dev/null", j));
  RunResult r{.eval_loss = t.run().eval.loss};
  for (const auto& [name, p] : t.model().named_parameters())
    r.params.push_back(p.to(Device::cpu()).to_vector<float>());
  return r;
}

// 12 steps over epochs of 8 batches: the feed is flushed at the end of epoch 0 and dropped,
// holding step 13's batch, when max_steps ends the run in epoch 1.
TEST(BatchPrefetch, CohortTrainWithPrefetchEqualsTheCpuAndTheSynchronousPath) {
  testing::StandInGpu gpu;
  const RunResult cpu = run_job(job("cpu", "cpu"));
  const RunResult sync = run_job(job("sync", "cuda", {"data.prefetch=0"}));
  EXPECT_EQ(gpu.memory.uploads, 0) << "data.prefetch = 0 copies each batch in its step";
  const int sync_copies = gpu.memory.copies;
  gpu.memory.copies = 0;
  const RunResult ahead = run_job(job("ahead", "cuda"));
  EXPECT_EQ(ahead.eval_loss, cpu.eval_loss);
  EXPECT_EQ(ahead.eval_loss, sync.eval_loss);
  EXPECT_EQ(ahead.params, cpu.params);
  EXPECT_EQ(ahead.params, sync.params);
  EXPECT_EQ(gpu.memory.uploads, 2 * 13) << "12 steps' x and y, and the 13th fetched ahead";
  EXPECT_EQ(gpu.memory.upload_waits, gpu.memory.uploads);
  EXPECT_EQ(sync_copies - gpu.memory.copies, 2 * 12) << "the batches' copies became uploads";
}

// Micro-batches (3 per step; an epoch of 8 batches ends with a step of 2).
TEST(BatchPrefetch, GradientAccumulationWithPrefetchEqualsTheCpu) {
  testing::StandInGpu gpu;
  const std::vector<std::string> accum = {"train.grad_accum_steps=3", "train.max_steps=5"};
  const RunResult cpu = run_job(job("accum_cpu", "cpu", accum));
  const RunResult ahead = run_job(job("accum_gpu", "cuda", accum));
  EXPECT_EQ(ahead.eval_loss, cpu.eval_loss);
  EXPECT_EQ(ahead.params, cpu.params);
  EXPECT_GT(gpu.memory.uploads, 0);
}

// The text path (a GPT on a generated text): steps drawn one ahead, the same rows per step.
TEST(BatchPrefetch, AGptOnTextWithPrefetchEqualsTheCpu) {
  testing::StandInGpu gpu;
  const auto dir = testing::fresh_dir("cohort_prefetch_", "text");
  {
    std::ofstream text(dir / "text.txt");
    for (int i = 0; i < 200; ++i) text << "In the beginning line " << i << " of a small text.\n";
  }
  auto gpt = [&](const std::string& name, const std::string& device) {
    return job(
        name, device,
        {"model.type=gpt", "model.n_layer=1", "model.n_head=2", "model.n_embd=16",
         "model.block_size=16", "data.dataset=text", "data.path=" + (dir / "text.txt").string(),
         "data.batch_size=4", "optim.name=adamw", "optim.lr=0.003", "train.max_steps=6",
         "train.sample_bytes=0", "train.eval_every=0", "train.eval_batches=1"});
  };
  const RunResult cpu = run_job(gpt("text_cpu", "cpu"));
  const RunResult ahead = run_job(gpt("text_gpu", "cuda"));
  EXPECT_EQ(ahead.eval_loss, cpu.eval_loss);
  EXPECT_EQ(ahead.params, cpu.params);
  EXPECT_EQ(gpu.memory.uploads, 2 * 6) << "each step's x and y, drawn one step ahead";
  EXPECT_EQ(gpu.memory.upload_waits, gpu.memory.uploads);
}

}  // namespace
}  // namespace cohort::train
