// PipelineEngine with ranks as threads: losses and every parameter gradient equal a single
// process's over the same micro-batches (GPipe, 1F1B, interleaved 1F1B with virtual stages,
// recompute, dropout), activation memory,
// and a stalled neighbour.
#include "cohort/parallel/pipeline/pipeline_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "cohort/nn/layers.h"
#include "cohort/nn/loss.h"
#include "tests/parallel/ddp_test_util.h"

namespace cohort::parallel {
namespace {

using testing::PG;
using Layers = std::vector<std::shared_ptr<nn::Module>>;

constexpr int kBlocks = 8;

struct ModelSpec {
  int64_t width = 8, classes = 4, rows = 3;
  bool dropout = false;
};

// kBlocks blocks of Linear + GELU (+ Dropout); the last block is a Linear head. Built from
// fixed seeds, so every call makes the same values.
Layers make_blocks(const ModelSpec& s) {
  Layers out;
  for (int i = 0; i < kBlocks; ++i) {
    if (i == kBlocks - 1) {
      out.push_back(std::make_shared<nn::Linear>(s.width, s.classes,
                                                 nn::LinearOptions{.seed = uint64_t(i + 1)}));
      break;
    }
    auto block = std::make_shared<nn::Sequential>();
    block->push_back(
        std::make_shared<nn::Linear>(s.width, s.width, nn::LinearOptions{.seed = uint64_t(i + 1)}));
    block->push_back(std::make_shared<nn::GELU>());
    if (s.dropout) block->push_back(std::make_shared<nn::Dropout>(0.25, uint64_t(100 + i)));
    out.push_back(block);
  }
  return out;
}

// Blocks [stage * n / p, (stage + 1) * n / p) as one chunk.
std::shared_ptr<nn::Module> chunk_of(const Layers& blocks, int stage, int p) {
  auto seq = std::make_shared<nn::Sequential>();
  for (int i = stage * kBlocks / p; i < (stage + 1) * kBlocks / p; ++i) seq->push_back(blocks[i]);
  return seq;
}

std::vector<PipelineMicroBatch> make_micro(const ModelSpec& s, int m) {
  std::vector<PipelineMicroBatch> out;
  for (int k = 0; k < m; ++k) {
    auto [x, y] = testing::make_batch(s.rows, s.width, s.classes, uint64_t(7 + k));
    out.push_back({x, y, 0.5 + 0.25 * k});
  }
  return out;
}

Tensor ce(const Tensor& out, const Tensor& target) {
  return nn::cross_entropy(out, target);
}

// One process: each micro-batch's forward and backward in order (the order in which every
// stage of GPipe and 1F1B calls its Dropout modules, so the masks are the same).
double reference(const Layers& blocks, const std::vector<PipelineMicroBatch>& micro) {
  auto model = chunk_of(blocks, 0, 1);
  double total = 0;
  for (const auto& mb : micro) {
    Tensor loss = ce((*model)(mb.input), mb.target);
    total += mb.weight * double(loss.item<float>());
    (loss * mb.weight).backward();
  }
  return total;
}

double rel(double a, double b) {
  return std::abs(a - b) / std::max(1e-30, std::abs(b));
}

// "" or the first parameter whose gradient differs by more than tol (relative to its max).
std::string compare_grads(const nn::Module& got, const nn::Module& want, double tol) {
  auto g = got.named_parameters(), w = want.named_parameters();
  if (g.size() != w.size()) return "parameter counts differ";
  for (size_t i = 0; i < g.size(); ++i) {
    if (!g[i].second.grad().defined()) return g[i].first + ": no gradient";
    double e = testing::max_relative(g[i].second.grad().to_vector<float>(),
                                     w[i].second.grad().to_vector<float>());
    if (e > tol) return detail::str(g[i].first, ": relative error ", e);
  }
  return "";
}

struct Config {
  PipelineSchedule schedule;
  int m;
  bool recompute, dropout;
};

std::string name(const Config& c, int p) {
  return detail::str(pipeline_schedule_name(c.schedule), " p=", p, " m=", c.m,
                     c.recompute ? " recompute" : "", c.dropout ? " dropout" : "");
}

// Every configuration of `schedules` x m x recompute x dropout on p stages with v chunks per
// rank (virtual stage vs = k * p + r holds blocks [vs * n / (p v), (vs + 1) * n / (p v))): the
// loss and every chunk's gradients against one process. Every chunk calls its Dropout modules
// in micro-batch order, as the one process does.
void check_equivalence(int p, int v, const std::vector<PipelineSchedule>& schedules,
                       const std::vector<int>& ms) {
  std::vector<Config> configs;
  for (auto sched : schedules)
    for (int m : ms)
      for (bool rc : {false, true})
        for (bool drop : {false, true}) configs.push_back({sched, m, rc, drop});
  std::vector<std::vector<std::string>> errors(configs.size(), std::vector<std::string>(p));
  std::vector<Layers> refs;
  std::vector<double> ref_loss;
  for (const auto& c : configs) {
    ModelSpec spec{.dropout = c.dropout};
    refs.push_back(make_blocks(spec));
    ref_loss.push_back(reference(refs.back(), make_micro(spec, c.m)));
  }
  testing::run_world(p, [&](int r, PG pg) {
    for (size_t i = 0; i < configs.size(); ++i) {
      const auto& c = configs[i];
      ModelSpec spec{.dropout = c.dropout};
      auto blocks = make_blocks(spec);
      std::vector<std::shared_ptr<nn::Module>> chunks;
      for (int k = 0; k < v; ++k) chunks.push_back(chunk_of(blocks, k * p + r, p * v));
      PipelineEngine engine(chunks, pg, {.schedule = c.schedule, .recompute = c.recompute},
                            [&](const Tensor& x) {
                              return Shape{x.size(0), spec.width};
                            });
      double loss = engine.forward_backward(make_micro(spec, c.m), ce);
      std::string& err = errors[i][size_t(r)];
      if (rel(loss, ref_loss[i]) > 1e-5) err = detail::str("loss ", loss, " vs ", ref_loss[i]);
      for (int k = 0; k < v && err.empty(); ++k) {
        err = compare_grads(*chunks[size_t(k)], *chunk_of(refs[i], k * p + r, p * v), 1e-5);
        if (!err.empty()) err = detail::str("chunk ", k, ": ", err);
      }
      EXPECT_NEAR(engine.last_stats().formula, double(p - 1) / double(v * c.m + p - 1), 1e-12);
    }
  });
  for (size_t i = 0; i < configs.size(); ++i)
    for (int r = 0; r < p; ++r)
      EXPECT_EQ(errors[i][size_t(r)], "") << name(configs[i], p) << " v=" << v << " stage " << r;
}

const std::vector<PipelineSchedule> kFlat{PipelineSchedule::kGPipe, PipelineSchedule::k1F1B};
const std::vector<PipelineSchedule> kInterleaved{PipelineSchedule::kInterleaved1F1B};

TEST(PipelineEngine, MatchesOneProcessTwoStages) {
  check_equivalence(2, 1, kFlat, {1, 3, 4, 8});
}
TEST(PipelineEngine, MatchesOneProcessFourStages) {
  check_equivalence(4, 1, kFlat, {1, 3, 4, 8});
}

TEST(PipelineEngine, InterleavedMatchesOneProcessTwoStages) {
  check_equivalence(2, 2, kInterleaved, {2, 4, 8});
}
TEST(PipelineEngine, InterleavedMatchesOneProcessFourStages) {
  check_equivalence(4, 2, kInterleaved, {4, 8});
}
// p = 1: the chunks hand activations and gradients to each other without the group.
TEST(PipelineEngine, InterleavedMatchesOneProcessOneStage) {
  check_equivalence(1, 2, kInterleaved, {1, 3});
  check_equivalence(1, 4, kInterleaved, {2});
}

TEST(PipelineEngine, InterleavedForwardOnlyMatchesOneProcess) {
  ModelSpec spec;
  auto x = testing::make_batch(5, spec.width, spec.classes, 3).first;
  auto want = (*chunk_of(make_blocks(spec), 0, 1))(x).to_vector<float>();
  for (int p : {1, 2}) {
    std::vector<std::vector<float>> got(static_cast<size_t>(p));
    testing::run_world(p, [&](int r, PG pg) {
      auto blocks = make_blocks(spec);
      PipelineEngine engine({chunk_of(blocks, r, 2 * p), chunk_of(blocks, p + r, 2 * p)}, pg,
                            {.schedule = PipelineSchedule::kInterleaved1F1B}, [&](const Tensor& t) {
                              return Shape{t.size(0), spec.width};
                            });
      Tensor out = engine.forward_only(x);
      EXPECT_EQ(out.defined(), r == p - 1);
      if (out.defined()) got[size_t(r)] = out.to_vector<float>();
    });
    EXPECT_LE(testing::max_relative(got[size_t(p - 1)], want), 1e-6) << "p=" << p;
  }
}

TEST(PipelineEngine, InterleavedNeedsMicroBatchesAMultipleOfPP) {
  std::vector<std::string> message(2);
  testing::run_world(2, [&](int r, PG pg) {
    ModelSpec spec;
    auto blocks = make_blocks(spec);
    PipelineEngine engine({chunk_of(blocks, r, 4), chunk_of(blocks, 2 + r, 4)}, pg,
                          {.schedule = PipelineSchedule::kInterleaved1F1B}, [&](const Tensor& x) {
                            return Shape{x.size(0), spec.width};
                          });
    try {
      engine.forward_backward(make_micro(spec, 3), ce);
      message[size_t(r)] = "no error";
    } catch (const InvalidArgument& e) {
      message[size_t(r)] = e.what();
    }
  });
  for (const auto& msg : message) {
    EXPECT_NE(msg.find("pipeline.micro_batches (3)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("multiple of parallel.pp (2)"), std::string::npos) << msg;
  }
}

TEST(PipelineEngine, ForwardOnlyMatchesOneProcess) {
  ModelSpec spec;
  auto x = testing::make_batch(5, spec.width, spec.classes, 3).first;
  auto want = (*chunk_of(make_blocks(spec), 0, 1))(x).to_vector<float>();
  std::vector<std::vector<float>> got(2);
  testing::run_world(2, [&](int r, PG pg) {
    PipelineEngine engine({chunk_of(make_blocks(spec), r, 2)}, pg, {}, [&](const Tensor& t) {
      return Shape{t.size(0), spec.width};
    });
    Tensor out = engine.forward_only(x);
    EXPECT_EQ(out.defined(), r == 1);
    if (out.defined()) got[size_t(r)] = out.to_vector<float>();
  });
  EXPECT_LE(testing::max_relative(got[1], want), 1e-6);
}

// Wider activations so that they, not temporaries, dominate what a forward keeps.
TEST(PipelineEngine, OneFOneBKeepsFewerActivationsThanGPipe) {
  const int p = 4, m = 8;
  ModelSpec spec{.width = 64, .classes = 4, .rows = 32};
  std::vector<std::vector<int64_t>> peak(2, std::vector<int64_t>(p));
  int i = 0;
  for (auto sched : {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    testing::run_world(p, [&](int r, PG pg) {
      auto chunk = chunk_of(make_blocks(spec), r, p);
      PipelineEngine engine({chunk}, pg, {.schedule = sched, .exclusive_compute = true},
                            [&](const Tensor& x) {
                              return Shape{x.size(0), spec.width};
                            });
      auto micro = make_micro(spec, m);
      pg->barrier();  // no rank allocates outside the engine while another measures
      engine.forward_backward(micro, ce);
      peak[size_t(i)][size_t(r)] = engine.last_stats().peak_activation_bytes;
    });
    ++i;
  }
  for (int r = 0; r < p; ++r) {
    int64_t gpipe = peak[0][size_t(r)], one_f = peak[1][size_t(r)];
    EXPECT_GT(gpipe, 0);
    EXPECT_LE(one_f, gpipe) << "stage " << r;
    // GPipe keeps all m micro-batches; 1F1B at most p - r of them.
    EXPECT_LE(double(one_f), double(gpipe) / m * (p - r) * 1.01 + 1024) << "stage " << r;
  }
}

TEST(PipelineEngine, RecomputeKeepsOnlyInputs) {
  const int p = 2, m = 4;
  ModelSpec spec{.width = 64, .classes = 4, .rows = 32};
  std::vector<int64_t> full(p), rc(p);
  for (bool recompute : {false, true}) {
    testing::run_world(p, [&](int r, PG pg) {
      PipelineEngine engine(
          {chunk_of(make_blocks(spec), r, p)}, pg,
          {.schedule = PipelineSchedule::kGPipe, .recompute = recompute, .exclusive_compute = true},
          [&](const Tensor& x) {
            return Shape{x.size(0), spec.width};
          });
      auto micro = make_micro(spec, m);
      pg->barrier();
      engine.forward_backward(micro, ce);
      (recompute ? rc : full)[size_t(r)] = engine.last_stats().peak_activation_bytes;
    });
  }
  // Stage 1 keeps m received inputs of 32 x 64 floats (8 KiB each) and nothing else.
  EXPECT_EQ(rc[1], int64_t(m) * 32 * 64 * 4);
  EXPECT_LT(rc[1] * 4, full[1]);
}

// Interleaved keeps more chunk forwards in flight than 1F1B: (p - s - 1) * 2 + (v - 1) * p + 1
// on stage s (all m * v when m == p). With recompute each keeps only its received input, so
// stage 1 (virtual stages 1 and 3, both receiving) keeps exactly that many inputs.
TEST(PipelineEngine, InterleavedKeepsItsInFlightInputs) {
  const int p = 2, v = 2;
  ModelSpec spec{.width = 64, .classes = 4, .rows = 32};
  for (int m : {2, 4, 8}) {
    int in_flight = 0, peak_in_flight = 0;
    for (const auto& a : make_pipeline_schedule(PipelineSchedule::kInterleaved1F1B, p, 1, m, v)) {
      in_flight += a.kind == PipelineAction::kForward ? 1 : -1;
      peak_in_flight = std::max(peak_in_flight, in_flight);
    }
    EXPECT_EQ(peak_in_flight, m == p ? m * v : (p - 1 - 1) * 2 + (v - 1) * p + 1);
    int64_t peak = 0;
    testing::run_world(p, [&](int r, PG pg) {
      auto blocks = make_blocks(spec);
      PipelineEngine engine({chunk_of(blocks, r, p * v), chunk_of(blocks, p + r, p * v)}, pg,
                            {.schedule = PipelineSchedule::kInterleaved1F1B,
                             .recompute = true,
                             .exclusive_compute = true},
                            [&](const Tensor& x) {
                              return Shape{x.size(0), spec.width};
                            });
      auto micro = make_micro(spec, m);
      pg->barrier();
      engine.forward_backward(micro, ce);
      if (r == 1) peak = engine.last_stats().peak_activation_bytes;
    });
    EXPECT_EQ(peak, int64_t(peak_in_flight) * 32 * 64 * 4) << "m=" << m;
  }
}

TEST(PipelineEngine, StalledNeighbourIsATimeoutNamingTheStage) {
  std::string message;
  testing::run_world(2, [&](int r, PG pg) {
    if (r == 0) {  // alive but never sends
      std::this_thread::sleep_for(std::chrono::milliseconds(800));
      return;
    }
    ModelSpec spec;
    PipelineEngine engine({chunk_of(make_blocks(spec), r, 2)}, pg,
                          {.timeout = std::chrono::milliseconds(200)}, [&](const Tensor& x) {
                            return Shape{x.size(0), spec.width};
                          });
    try {
      engine.forward_backward(make_micro(spec, 2), ce);
      message = "no error";
    } catch (const Timeout& e) {
      message = e.what();
    } catch (const std::exception& e) {
      message = std::string("not a Timeout: ") + e.what();
    }
  });
  EXPECT_NE(message.find("pipeline stage 1: waiting for the activation of micro-batch 0 from "
                         "stage 0"),
            std::string::npos)
      << message;
}

TEST(PipelineEngine, Errors) {
  testing::run_world(1, [&](int, PG pg) {
    auto shape = [](const Tensor& x) { return Shape{x.size(0), 8}; };
    auto chunk = std::make_shared<nn::Linear>(8, 4);
    EXPECT_THROW(PipelineEngine({chunk, chunk}, pg, {.schedule = PipelineSchedule::k1F1B}, shape),
                 InvalidArgument);
    EXPECT_THROW(PipelineEngine({}, pg, {.schedule = PipelineSchedule::kInterleaved1F1B}, shape),
                 InvalidArgument);
    EXPECT_THROW(PipelineEngine({chunk}, nullptr, {}, shape), InvalidArgument);
    EXPECT_THROW(PipelineEngine({nullptr}, pg, {}, shape), InvalidArgument);
    PipelineEngine engine({chunk}, pg, {}, shape);
    EXPECT_THROW(engine.forward_backward({}, ce), InvalidArgument);
  });
}

}  // namespace
}  // namespace cohort::parallel
