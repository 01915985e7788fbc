// The pipeline bubble of PipelineEngine against the formula (p - 1) / (m + p - 1) (interleaved
// with v chunks per rank: (p - 1) / (v m + p - 1)), and the peak activation memory per stage of
// GPipe against 1F1B (docs/pipeline.md).
//
//   pipeline_bubble [--steps S] [--delay-ms F] [--width W] [--rows R]
//
// Ranks run as threads of this process over shared memory. Bubble: a tiny model (one 8-wide
// Linear per stage) whose forward sleeps F ms (default 20) and backward 2F ms (the engine's
// stage_delay_s seam), so every stage takes the same, known time; interleaved-v2 rows give a
// stage two 8-wide chunks that each sleep F/2 ms forward and F ms backward. Each configuration runs
// one untimed step, then S timed ones (default 9), each after a barrier. The measured bubble is
// stage 0's bubble_fraction (total - compute) / total, the median over the steps: stage 0 runs
// from the first forward to the last backward of the whole step, the span the formula
// describes (later stages finish their last backward earlier). "max" is the largest median
// over stages. Memory: a W-wide model (default 1024; two Linear + GELU blocks per stage), R
// rows per micro-batch (default 64), p = 4, m = 8, no delay; peak_activation_bytes per stage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cohort/comm/communicator.h"
#include "cohort/comm/process_group.h"
#include "cohort/core/thread_pool.h"
#include "cohort/nn/layers.h"
#include "cohort/nn/loss.h"
#include "cohort/parallel/pipeline/pipeline_engine.h"
#include "cohort/rendezvous/hash_store.h"
#include "cohort/tensor/allocator.h"

namespace {

using namespace cohort;
using parallel::PipelineEngine;
using parallel::PipelineSchedule;

struct Args {
  int steps = 9;
  double delay_ms = 20;
  int64_t width = 1024, rows = 64;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    double v = std::atof(argv[i + 1]);
    if (k == "--steps")
      a.steps = int(v);
    else if (k == "--delay-ms")
      a.delay_ms = v;
    else if (k == "--width")
      a.width = int64_t(v);
    else if (k == "--rows")
      a.rows = int64_t(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

// Runs fn(rank, group) on p ranks as threads; an exception on any rank ends the bench.
void run_world(int p, const std::function<void(int, std::shared_ptr<comm::ProcessGroup>)>& fn) {
  auto store = std::make_shared<rendezvous::HashStore>();
  comm::CommOptions o;
  o.device.transport = comm::transport::TransportKind::kShm;
  o.timeout = std::chrono::seconds(60);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r, comm::make_process_group(comm::Communicator::create(store, r, p, o)));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        std::exit(1);
      }
    });
  }
  for (auto& t : threads) t.join();
}

std::vector<parallel::PipelineMicroBatch> micro_batches(int m, int64_t rows, int64_t width) {
  std::vector<parallel::PipelineMicroBatch> out;
  for (int k = 0; k < m; ++k) {
    std::vector<int64_t> y(size_t(rows), 0);
    out.push_back({randn({rows, width}, uint64_t(k + 1)), from_vector_i64(y, {rows}), 1.0});
  }
  return out;
}

Tensor ce(const Tensor& out, const Tensor& target) {
  return nn::cross_entropy(out, target);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void bubble_table(const Args& a) {
  std::printf("schedule,p,m,bubble,formula,ratio,max_stage_bubble,step_s\n");
  struct Sched {
    PipelineSchedule schedule;
    int v;  // chunks per rank
  };
  for (auto [sched, v] : {Sched{PipelineSchedule::kGPipe, 1}, Sched{PipelineSchedule::k1F1B, 1},
                          Sched{PipelineSchedule::kInterleaved1F1B, 2}})
    for (int p : {2, 4})
      for (int m : {4, 8}) {
        std::vector<std::vector<double>> bubble(static_cast<size_t>(p)),
            total(static_cast<size_t>(p));
        double formula = 0;
        run_world(p, [&](int r, std::shared_ptr<comm::ProcessGroup> pg) {
          // v chunks of a stage share its time: each sleeps F / v ms forward, 2F / v backward.
          std::vector<std::shared_ptr<nn::Module>> chunks;
          for (int c = 0; c < v; ++c) chunks.push_back(std::make_shared<nn::Linear>(8, 8));
          PipelineEngine engine(chunks, pg,
                                {.schedule = sched, .stage_delay_s = a.delay_ms / 1000 / v},
                                [](const Tensor& x) {
                                  return Shape{x.size(0), 8};
                                });
          auto micro = micro_batches(m, 4, 8);
          for (int s = 0; s <= a.steps; ++s) {
            pg->barrier();
            engine.forward_backward(micro, ce);
            if (s == 0) continue;  // untimed
            bubble[size_t(r)].push_back(engine.last_stats().bubble_fraction);
            total[size_t(r)].push_back(engine.last_stats().total_s);
          }
          formula = engine.last_stats().formula;
        });
        double b0 = median(bubble[0]), worst = 0;
        for (const auto& b : bubble) worst = std::max(worst, median(b));
        std::string name = parallel::pipeline_schedule_name(sched);
        if (v > 1) name += "-v" + std::to_string(v);
        std::printf("%s,%d,%d,%.4f,%.4f,%.3f,%.4f,%.3f\n", name.c_str(), p, m, b0, formula,
                    b0 / formula, worst, median(total[0]));
        std::fflush(stdout);
      }
}

void memory_table(const Args& a) {
  const int p = 4, m = 8;
  std::printf("\nschedule,stage,peak_activation_bytes (p=%d m=%d width=%lld rows=%lld)\n", p, m,
              (long long)a.width, (long long)a.rows);
  for (auto sched : {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    std::vector<int64_t> peak(static_cast<size_t>(p));
    run_world(p, [&](int r, std::shared_ptr<comm::ProcessGroup> pg) {
      auto chunk = std::make_shared<nn::Sequential>();
      for (int i = 0; i < 2; ++i) {
        chunk->push_back(std::make_shared<nn::Linear>(a.width, a.width));
        chunk->push_back(std::make_shared<nn::GELU>());
      }
      PipelineEngine engine({chunk}, pg, {.schedule = sched, .exclusive_compute = true},
                            [&](const Tensor& x) {
                              return Shape{x.size(0), a.width};
                            });
      auto micro = micro_batches(m, a.rows, a.width);
      pg->barrier();  // nothing else allocates while the engine measures
      engine.forward_backward(micro, ce);
      peak[size_t(r)] = engine.last_stats().peak_activation_bytes;
    });
    for (int r = 0; r < p; ++r)
      std::printf("%s,%d,%lld (%s)\n", parallel::pipeline_schedule_name(sched), r,
                  (long long)peak[size_t(r)], format_bytes(uint64_t(peak[size_t(r)])).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  set_num_threads(1);  // ranks share the machine's cores
  bubble_table(a);
  memory_table(a);
  return 0;
}
