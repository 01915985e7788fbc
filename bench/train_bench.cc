// Training throughput of cohort's MLP and CNN, the counterpart of bench/torch_train.py.
//
// Both sides train the same architecture with SGD (lr 0.01, momentum 0.9) on a fixed set of
// pre-built batches, so data loading is excluded: a step is forward + cross entropy +
// zero_grad + backward + optimizer step + loss.item(), nothing else. Each repeat times `steps`
// steps after `warmup` untimed ones (the first repeat's warmup also fills the caching allocator).
//
//   train_bench --model mlp|cnn|all --steps N --warmup W --batch B --threads T --repeats R
//               [--denormals flush|keep] [--breakdown]
//   train_bench --batch B --save-batches FILE   (writes the batches for torch_train.py, exits)
//
// Denormals: a model that has nearly memorised its batches produces gradients in the denormal
// range, where x86 arithmetic is 10-100x slower; how soon that happens depends on the data and
// the step count, not on the framework. Both sides therefore flush denormals to zero by default
// (MXCSR FTZ+DAZ here, torch.set_flush_denormal(True) there); --denormals keep measures
// without.
//
// Prints one human line per repeat and the median on stderr, and one JSON line per model on
// stdout, with samples/s by wall clock and by process CPU time (see Stamp):
//   {"impl":"cohort","model":"mlp",...,"samples_per_s":[..],"median_samples_per_s":..,
//    "cpu_samples_per_s":[..],"median_cpu_samples_per_s":..,"final_loss":..}
// --breakdown adds the median CPU ms per step of forward (with the loss), backward (with
// zero_grad) and the optimizer step.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <xmmintrin.h>

#include "cohort/core/error.h"
#include "cohort/core/thread_pool.h"
#include "cohort/data/synthetic.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/cnn.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/optim/sgd.h"

namespace {

using Clock = std::chrono::steady_clock;
using cohort::Tensor;

constexpr int kFixedBatches = 16;  // cycled through; torch_train.py reads the same ones
// Weakly separated classes (centres 0.1 sigma apart in each pixel): enough signal to learn,
// hard enough that the loss stays well above zero for a benchmark's few hundred steps.
constexpr float kSeparation = 0.1f;
constexpr double kLr = 0.01;
constexpr double kMomentum = 0.9;

struct Options {
  std::string model = "all";
  int steps = 100;
  int warmup = 20;
  int batch = 64;
  int threads = 1;
  int repeats = 3;
  bool breakdown = false;
  bool flush_denormals = true;
  std::string save_batches;  // non-empty: write the batches there and exit
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "train_bench: %s\nusage: train_bench [--model mlp|cnn|all] [--steps N] "
               "[--warmup W] [--batch B] [--threads T] [--repeats R]\n"
               "                   [--denormals flush|keep] [--breakdown] [--save-batches FILE]\n",
               why);
  std::exit(2);
}

int parse_int(const char* flag, const char* v, int min) {
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < min || x > 1000000) {
    usage((std::string(flag) + ": expected an integer >= " + std::to_string(min) + ", got '" + v +
           "'")
              .c_str());
  }
  return int(x);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--breakdown") {
      o.breakdown = true;
      continue;
    }
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--model") {
      o.model = v;
      if (o.model != "mlp" && o.model != "cnn" && o.model != "all") usage("--model: mlp|cnn|all");
    } else if (a == "--denormals") {
      if (std::strcmp(v, "flush") != 0 && std::strcmp(v, "keep") != 0) {
        usage("--denormals: flush|keep");
      }
      o.flush_denormals = std::strcmp(v, "flush") == 0;
    } else if (a == "--save-batches") {
      o.save_batches = v;
    } else if (a == "--steps") {
      o.steps = parse_int("--steps", v, 1);
    } else if (a == "--warmup") {
      o.warmup = parse_int("--warmup", v, 0);
    } else if (a == "--batch") {
      o.batch = parse_int("--batch", v, 1);
    } else if (a == "--threads") {
      o.threads = parse_int("--threads", v, 1);
    } else if (a == "--repeats") {
      o.repeats = parse_int("--repeats", v, 1);
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// kFixedBatches batches of Fashion-MNIST-shaped data ([B, 1, 28, 28] images, 10 classes),
// materialised before any timing.
std::vector<cohort::data::Batch> make_batches(int batch) {
  cohort::data::Synthetic ds({.num_samples = int64_t(batch) * kFixedBatches,
                              .shape = {1, 28, 28},
                              .num_classes = 10,
                              .seed = 1234,
                              .separation = kSeparation});
  std::vector<cohort::data::Batch> out;
  for (int b = 0; b < kFixedBatches; ++b) {
    std::vector<int64_t> idx(static_cast<size_t>(batch));
    std::iota(idx.begin(), idx.end(), int64_t(b) * batch);
    out.push_back(ds.get_batch(idx));
  }
  return out;
}

// File layout (little-endian): "CHTB", int32 batches, int32 batch size, int32 features, then
// per batch x float32 [B, features] and y int64 [B].
void save_batches(const std::vector<cohort::data::Batch>& batches, const std::string& path) {
  std::ofstream f(path, std::ios::binary);
  const int64_t b = batches[0].x.size(0), features = batches[0].x.numel() / b;
  const int32_t header[3] = {int32_t(batches.size()), int32_t(b), int32_t(features)};
  f.write("CHTB", 4);
  f.write(reinterpret_cast<const char*>(header), sizeof(header));
  for (const auto& batch : batches) {
    f.write(reinterpret_cast<const char*>(batch.x.data<float>()),
            std::streamsize(batch.x.nbytes()));
    f.write(reinterpret_cast<const char*>(batch.y.data<int64_t>()),
            std::streamsize(batch.y.nbytes()));
  }
  f.close();
  COHORT_CHECK_IO(f.good(), "train_bench: cannot write batches to ", path);
}

// A point in time on two clocks. Wall time is what a user waits; process CPU time leaves out
// the time this process sat preempted, so on a shared machine it is the steadier measure of the
// work done (with one thread the two agree on an idle machine).
struct Stamp {
  double wall = 0, cpu = 0;
  static Stamp now() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return {std::chrono::duration<double>(Clock::now().time_since_epoch()).count(),
            double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec)};
  }
  Stamp operator-(const Stamp& o) const { return {wall - o.wall, cpu - o.cpu}; }
  Stamp& operator+=(const Stamp& o) {
    wall += o.wall;
    cpu += o.cpu;
    return *this;
  }
};

// Time in each phase, summed over the timed steps of one repeat.
struct Phases {
  Stamp forward, backward, step;
};

// One training step. With `phases`, each phase is timed separately (CPU ops are synchronous,
// so reading the clocks between phases is exact; it costs about a microsecond per step).
float train_step(cohort::nn::Module& model, cohort::optim::SGD& opt, const cohort::data::Batch& b,
                 Phases* phases) {
  Stamp t0 = phases ? Stamp::now() : Stamp{};
  Tensor loss = cohort::nn::cross_entropy(model(b.x), b.y);
  Stamp t1 = phases ? Stamp::now() : Stamp{};
  opt.zero_grad();
  loss.backward();
  Stamp t2 = phases ? Stamp::now() : Stamp{};
  opt.step();
  if (phases) {
    phases->forward += t1 - t0;
    phases->backward += t2 - t1;
    phases->step += Stamp::now() - t2;
  }
  return loss.item<float>();
}

std::unique_ptr<cohort::nn::Module> make_model(const std::string& name) {
  if (name == "mlp") {
    return std::make_unique<cohort::nn::MLP>(std::vector<int64_t>{784, 512, 256, 10});
  }
  return std::make_unique<cohort::nn::CNN>();
}

struct Result {
  std::vector<double> wall_sps, cpu_sps;  // samples/s per repeat, by each clock
  std::vector<Phases> phases;
  float loss = 0;
};

void print_list(const char* key, const std::vector<double>& v) {
  std::printf(",\"%s\":[", key);
  for (size_t i = 0; i < v.size(); ++i) std::printf("%s%.1f", i ? "," : "", v[i]);
  std::printf("],\"median_%s\":%.1f", key, median(v));
}

void print_json(const std::string& name, const Options& o, const Result& r) {
  std::printf(
      "{\"impl\":\"cohort\",\"model\":\"%s\",\"batch\":%d,\"threads\":%d,\"steps\":%d,"
      "\"warmup\":%d,\"denormals\":\"%s\"",
      name.c_str(), o.batch, o.threads, o.steps, o.warmup, o.flush_denormals ? "flush" : "keep");
  print_list("samples_per_s", r.wall_sps);
  print_list("cpu_samples_per_s", r.cpu_sps);
  std::printf(",\"final_loss\":%.4f", r.loss);
  if (o.breakdown) {  // CPU milliseconds per step in each phase, median over repeats
    auto ms = [&](Stamp Phases::*f) {
      std::vector<double> v;
      for (const Phases& p : r.phases) v.push_back((p.*f).cpu * 1e3 / o.steps);
      return median(v);
    };
    std::printf(",\"cpu_ms_per_step\":{\"forward\":%.3f,\"backward\":%.3f,\"optimizer\":%.3f}",
                ms(&Phases::forward), ms(&Phases::backward), ms(&Phases::step));
  }
  std::printf("}\n");
  std::fflush(stdout);
}

void run_model(const std::string& name, const Options& o,
               const std::vector<cohort::data::Batch>& batches) {
  auto model = make_model(name);
  model->train();
  cohort::optim::SGD opt(model->named_parameters(), {.lr = kLr, .momentum = kMomentum});
  size_t next = 0;
  auto batch = [&]() -> const cohort::data::Batch& { return batches[next++ % batches.size()]; };

  Result r;
  for (int rep = 0; rep < o.repeats; ++rep) {
    for (int i = 0; i < o.warmup; ++i) r.loss = train_step(*model, opt, batch(), nullptr);
    Phases ph;
    Stamp t0 = Stamp::now();
    for (int i = 0; i < o.steps; ++i) {
      r.loss = train_step(*model, opt, batch(), o.breakdown ? &ph : nullptr);
    }
    Stamp d = Stamp::now() - t0;
    const double samples = double(o.steps) * o.batch;
    r.wall_sps.push_back(samples / d.wall);
    r.cpu_sps.push_back(samples / d.cpu);
    r.phases.push_back(ph);
    std::fprintf(stderr,
                 "cohort %s repeat %d: %.1f samples/s (%.3f ms/step; by CPU time %.1f), loss "
                 "%.4f\n",
                 name.c_str(), rep + 1, r.wall_sps.back(), d.wall * 1e3 / o.steps, r.cpu_sps.back(),
                 r.loss);
  }
  COHORT_CHECK_ARG(std::isfinite(r.loss), "train_bench: ", name, " loss is not finite: ", r.loss);
  std::fprintf(stderr, "cohort %s median: %.1f samples/s (by CPU time %.1f) over %d repeats\n",
               name.c_str(), median(r.wall_sps), median(r.cpu_sps), o.repeats);
  print_json(name, o, r);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  // Before the pool starts: threads inherit the creating thread's MXCSR.
  if (o.flush_denormals) _mm_setcsr(_mm_getcsr() | _MM_FLUSH_ZERO_ON | 0x0040 /* DAZ */);
  try {
    cohort::set_num_threads(o.threads);
    auto batches = make_batches(o.batch);
    if (!o.save_batches.empty()) {
      save_batches(batches, o.save_batches);
      return 0;
    }
    for (const char* m : {"mlp", "cnn"}) {
      if (o.model == "all" || o.model == m) run_model(m, o, batches);
    }
  } catch (const cohort::Error& e) {
    std::fprintf(stderr, "train_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
