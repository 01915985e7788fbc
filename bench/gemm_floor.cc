// The GEMM floor of one MLP 784-512-256-10 training step (batch 64): times the eight sgemm
// calls that ops::linear and LinearBackward issue, alone, with nothing else around them. A
// training step can only be as fast as this sum, so (step time - floor) is what the framework
// itself costs: autograd, elementwise ops, loss, optimizer, allocation.
//
//   gemm_floor [--iters N] [--batch B]
//
// Besides cohort's path (cohort::cpu::sgemm -> OpenBLAS), it times oneDNN's dnnl_sgemm when
// libdnnl.so.2 can be loaded (PyTorch's CPU build ships it), to show what a GEMM with AVX-512
// kernels would give on this CPU. Times are process CPU time (steady on a shared machine).
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "cohort/core/thread_pool.h"
#include "cohort/kernels/cpu/gemm.h"

namespace {

using cohort::cpu::MatRef;
using cohort::cpu::Trans;

// One row-major product c [m, n] = op(a) [m, k] op(b) [k, n] (+ c when beta = 1).
struct Gemm {
  const char* what;
  int64_t m, n, k;
  bool ta, tb;  // a or b used transposed
  float beta;
};

std::vector<Gemm> mlp_step_gemms(int64_t b) {
  return {
      {"fwd  fc1 y = x W1^T", b, 512, 784, false, true, 1.0f},
      {"fwd  fc2 y = h W2^T", b, 256, 512, false, true, 1.0f},
      {"fwd  fc3 y = h W3^T", b, 10, 256, false, true, 1.0f},
      {"bwd  fc3 dx = g W3", b, 256, 10, false, false, 0.0f},
      {"bwd  fc3 dW = g^T h", 10, 256, b, true, false, 0.0f},
      {"bwd  fc2 dx = g W2", b, 512, 256, false, false, 0.0f},
      {"bwd  fc2 dW = g^T h", 256, 512, b, true, false, 0.0f},
      {"bwd  fc1 dW = g^T x", 512, 784, b, true, false, 0.0f},
  };
}

double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Buffers for one gemm, filled with small values (no denormals, no infinities).
struct Buffers {
  std::vector<float> a, b, c;
  explicit Buffers(const Gemm& g)
      : a(size_t(g.m * g.k), 0.01f), b(size_t(g.k * g.n), 0.02f), c(size_t(g.m * g.n), 0.0f) {}
};

using GemmFn = std::function<void(const Gemm&, Buffers&)>;

void cohort_gemm(const Gemm& g, Buffers& x) {
  const int64_t lda = g.ta ? g.m : g.k, ldb = g.tb ? g.k : g.n;
  cohort::cpu::sgemm(g.m, g.n, g.k, 1.0f, MatRef{x.a.data(), lda, g.ta ? Trans::kYes : Trans::kNo},
                     MatRef{x.b.data(), ldb, g.tb ? Trans::kYes : Trans::kNo}, g.beta, x.c.data(),
                     g.n);
}

// dnnl_status_t dnnl_sgemm(char transa, char transb, dnnl_dim_t M, N, K, float alpha,
//                          const float* A, lda, const float* B, ldb, float beta, float* C, ldc)
// (row-major, as documented in oneDNN's dnnl.h).
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);

DnnlSgemm load_dnnl() {
  void* h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
  return h ? reinterpret_cast<DnnlSgemm>(dlsym(h, "dnnl_sgemm")) : nullptr;
}

// Median-free but steady: CPU time of `iters` back-to-back calls, after 10 untimed ones.
double time_us(const GemmFn& fn, const Gemm& g, Buffers& x, int iters) {
  for (int i = 0; i < 10; ++i) fn(g, x);
  double t0 = cpu_now();
  for (int i = 0; i < iters; ++i) fn(g, x);
  return (cpu_now() - t0) * 1e6 / iters;
}

void report(const char* name, const GemmFn& fn, const std::vector<Gemm>& gemms, int iters) {
  std::printf("\n%s\n%-24s %5s %5s %5s %10s %9s\n", name, "gemm", "m", "n", "k", "us", "GFLOP/s");
  double total = 0, flops = 0;
  for (const Gemm& g : gemms) {
    Buffers x(g);
    double us = time_us(fn, g, x, iters);
    double f = 2.0 * double(g.m) * double(g.n) * double(g.k);
    total += us;
    flops += f;
    std::printf("%-24s %5lld %5lld %5lld %10.1f %9.1f\n", g.what, (long long)g.m, (long long)g.n,
                (long long)g.k, us, f / us * 1e-3);
  }
  std::printf("%-24s %17s %10.1f %9.1f   (%.0f samples/s if a step were only these)\n", "total", "",
              total, flops / total * 1e-3, double(gemms[0].m) / total * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 300;
  int64_t batch = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--batch") == 0) batch = std::max(1, std::atoi(argv[i + 1]));
  }
  cohort::set_num_threads(1);
  auto gemms = mlp_step_gemms(batch);
  report("cohort::cpu::sgemm (OpenBLAS)", cohort_gemm, gemms, iters);
  if (DnnlSgemm dnnl = load_dnnl()) {
    auto fn = [dnnl](const Gemm& g, Buffers& x) {
      const int64_t lda = g.ta ? g.m : g.k, ldb = g.tb ? g.k : g.n;
      dnnl(g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n, g.k, 1.0f, x.a.data(), lda, x.b.data(),
           ldb, g.beta, x.c.data(), g.n);
    };
    report("dnnl_sgemm (oneDNN, libdnnl.so.2)", fn, gemms, iters);
  } else {
    std::printf("\n(libdnnl.so.2 not found: oneDNN comparison skipped)\n");
  }
  return 0;
}
