// Matrix products on OpenBLAS sgemm: matmul (2-D, batched 3-D, 3-D x 2-D) and linear.
// A strided 2-D view whose rows or columns are contiguous (a transpose, a column slice) goes to
// sgemm as it is, with a transpose flag and a leading dimension; only other layouts are copied.
#include <algorithm>
#include <atomic>

#include "cohort/autograd/node.h"
#include "cohort/core/thread_pool.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/kernels/cpu/gemm.h"
#include "cohort/ops/checks.h"
#include "cohort/ops/ops.h"

namespace cohort::ops {
namespace {

using cpu::MatRef;
using cpu::Trans;

Trans flip(Trans t) {
  return t == Trans::kNo ? Trans::kYes : Trans::kNo;
}

std::atomic<MatmulPrecision> g_precision{MatmulPrecision::kF32};

using Gemm = decltype(dispatch::KernelTable::sgemm);

// The table's gemm for a product made with precision p.
Gemm gemm_for(const dispatch::KernelTable& kt, Device d, MatmulPrecision p) {
  if (p == MatmulPrecision::kF32) return kt.sgemm;
  return dispatch::need(kt.gemm_bf16, "matmul in bf16 (train.precision)", d);
}

// The last two dims of a 2-D or 3-D tensor as gemm operands: matrix b sits at
// holder.data + b * batch_stride. `holder` keeps the data alive: the input (detached) when it can
// be used in place, else a contiguous copy.
struct Operand {
  Tensor holder;
  int64_t rows = 0, cols = 0, batch_stride = 0;
  MatRef ref;
  // The address comes from `holder` on every use, not from the time the operand was made: a
  // storage may move between forward and backward (ZeRO-3 frees a module's parameters after
  // its forward and gathers them into a fresh block before its backward).
  MatRef at(int64_t b) const { return {base() + b * batch_stride, ref.ld, ref.trans}; }
  // The transpose of matrix b, for backward (dA = g B^T, dB = A^T g).
  MatRef at_t(int64_t b) const { return {base() + b * batch_stride, ref.ld, flip(ref.trans)}; }
  const float* base() const { return holder.data<float>(); }
};

Operand make_operand(const Tensor& t) {
  const size_t nd = size_t(t.dim());
  const int64_t r = t.shape()[nd - 2], c = t.shape()[nd - 1];
  const int64_t sr = t.strides()[nd - 2], sc = t.strides()[nd - 1];
  Operand op{t.detach(), r, c, nd == 3 ? t.strides()[0] : 0, {}};
  if ((c == 1 || sc == 1) && (r == 1 || sr >= c)) {  // rows contiguous: as stored
    op.ref = {nullptr, r == 1 ? std::max<int64_t>(c, 1) : sr, Trans::kNo};
  } else if ((r == 1 || sr == 1) && (c == 1 || sc >= r)) {  // columns contiguous: a transpose
    op.ref = {nullptr, c == 1 ? std::max<int64_t>(r, 1) : sc, Trans::kYes};
  } else {
    op.holder = t.clone_raw();
    op.batch_stride = nd == 3 ? r * c : 0;
    op.ref = {nullptr, std::max<int64_t>(c, 1), Trans::kNo};
  }
  return op;
}

// c [batch, m, n] (contiguous) = A_b [m, k] x B_b [k, n] for each b. Many small products run in
// parallel over the batch (single-threaded gemms); large ones let OpenBLAS use the threads.
// On a device, one gemm per batch element in turn on its stream.
// In bf16, every product goes through the table's gemm_bf16 in turn (on the CPU that is the
// emulation, whose copies dominate anyway).
template <typename GetA, typename GetB>
void batched_gemm(Device d, MatmulPrecision p, int64_t batch, int64_t m, int64_t n, int64_t k,
                  GetA a, GetB b, float* c) {
  if (!d.is_cpu() || p != MatmulPrecision::kF32) {
    const Gemm gemm = gemm_for(dispatch::kernels_for(d), d, p);
    for (int64_t i = 0; i < batch; ++i) gemm(d, m, n, k, 1.0f, a(i), b(i), 0.0f, c + i * m * n, n);
    return;
  }
  // The small-product path does not depend on the thread count, so neither do the results.
  if (batch > 1 && m * n * k < (int64_t(1) << 21)) {
    cpu::SerialBlasScope serial;
    parallel_for(0, batch, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        cpu::sgemm_unsynced(m, n, k, 1.0f, a(i), b(i), 0.0f, c + i * m * n, n);
    });
    return;
  }
  for (int64_t i = 0; i < batch; ++i) cpu::sgemm(m, n, k, 1.0f, a(i), b(i), 0.0f, c + i * m * n, n);
}

Tensor view_as_shape(const Tensor& contiguous, const Shape& shape) {
  return contiguous.as_strided(shape, contiguous_strides(shape), contiguous.offset());
}

// A [.., K] tensor as a 2-D [rows, K] view: itself when 2-D, else a view of its contiguous
// form (1-D x is one row).
Tensor as_rows(const Tensor& x) {
  if (x.dim() == 2) return x;
  const int64_t k = x.size(-1);
  Tensor c = x.contiguous_raw();
  return c.as_strided({k == 0 ? 0 : c.numel() / k, k}, {k, 1}, c.offset());
}

// Batched matmul [B, M, K] x [B, K, N] (batch strides may be 0 for a shared operand).
struct BmmBackward : autograd::Node {
  Operand a, b;
  int64_t batch = 0;
  MatmulPrecision precision = MatmulPrecision::kF32;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0].contiguous_raw();
    const Device d = g.device();
    const int64_t m = a.rows, k = a.cols, n = b.cols;
    const float* gp = g.data<float>();
    auto gb = [&](int64_t i) { return MatRef{gp + i * m * n, std::max<int64_t>(n, 1)}; };
    Tensor da, db;
    if (needs_grad(0)) {  // dA_b [M, K] = g_b [M, N] x B_b^T [N, K]
      da = empty({batch, m, k}, DType::f32, d);
      batched_gemm(
          d, precision, batch, m, k, n, gb, [&](int64_t i) { return b.at_t(i); }, da.data<float>());
    }
    if (needs_grad(1)) {  // dB_b [K, N] = A_b^T [K, M] x g_b [M, N]
      db = empty({batch, k, n}, DType::f32, d);
      batched_gemm(
          d, precision, batch, k, n, m, [&](int64_t i) { return a.at_t(i); }, gb, db.data<float>());
    }
    return {da, db};
  }
  std::string name() const override { return "BmmBackward"; }
};

// 2-D product [M, K] x [K, N]; a 3-D x 2-D product arrives here with a flattened to
// [B*M, K], and a_shape restores dA's shape.
struct MmBackward : autograd::Node {
  Operand a, b;
  Shape a_shape;
  MatmulPrecision precision = MatmulPrecision::kF32;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0].contiguous_raw();
    const Device d = g.device();
    const Gemm gemm = gemm_for(dispatch::kernels_for(d), d, precision);
    const int64_t m = a.rows, k = a.cols, n = b.cols;
    const MatRef gm{g.data<float>(), std::max<int64_t>(n, 1)};
    Tensor da, db;
    if (needs_grad(0)) {
      da = empty({m, k}, DType::f32, d);
      gemm(d, m, k, n, 1.0f, gm, b.at_t(0), 0.0f, da.data<float>(), std::max<int64_t>(k, 1));
      da = view_as_shape(da, a_shape);
    }
    if (needs_grad(1)) {
      db = empty({k, n}, DType::f32, d);
      gemm(d, k, n, m, 1.0f, a.at_t(0), gm, 0.0f, db.data<float>(), std::max<int64_t>(n, 1));
    }
    return {da, db};
  }
  std::string name() const override { return "MmBackward"; }
};

// linear: x [R, in] (flattened), weight [out, in], bias [out].
struct LinearBackward : autograd::Node {
  Operand x, w;
  Shape x_shape;
  MatmulPrecision precision = MatmulPrecision::kF32;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0].contiguous_raw();
    const Device d = g.device();
    const dispatch::KernelTable& kt = dispatch::kernels_for(d);
    const Gemm gemm = gemm_for(kt, d, precision);
    const int64_t rows = x.rows, in = x.cols, out = w.rows;
    const float* gp = g.data<float>();
    const int64_t ldg = std::max<int64_t>(out, 1), ldi = std::max<int64_t>(in, 1);
    Tensor dx, dw, db;
    if (needs_grad(0)) {  // dx [R, in] = g [R, out] x W [out, in]; skipped for a first layer
      dx = empty({rows, in}, DType::f32, d);
      gemm(d, rows, in, out, 1.0f, {gp, ldg}, w.at(0), 0.0f, dx.data<float>(), ldi);
      dx = view_as_shape(dx, x_shape);
    }
    if (needs_grad(1)) {  // dW [out, in] = g^T [out, R] x x [R, in], into DDP's bucket if armed
      dw = grad_buffer(1, {out, in}, d);
      gemm(d, out, in, rows, 1.0f, {gp, ldg, Trans::kYes}, x.at(0), 0.0f, dw.data<float>(), ldi);
    }
    if (needs_grad(2)) {  // db [out] = column sums of g
      db = grad_buffer(2, {out}, d);
      kt.sum_rows(d, gp, rows, out, db.data<float>());
    }
    return {dx, dw, db};
  }
  std::string name() const override { return "LinearBackward"; }
};

Tensor mm(const Tensor& a2, const Tensor& b, const Tensor& a_orig, const Shape& out_shape) {
  Operand ao = make_operand(a2), bo = make_operand(b);
  const int64_t m = ao.rows, k = ao.cols, n = bo.cols;
  const Device d = dispatch::common_device("matmul", {&a2, &b});
  Tensor out = empty({m, n}, DType::f32, d);
  const MatmulPrecision p = matmul_precision();
  gemm_for(dispatch::kernels_for(d), d, p)(d, m, n, k, 1.0f, ao.at(0), bo.at(0), 0.0f,
                                           out.data<float>(), std::max<int64_t>(n, 1));
  out = view_as_shape(out, out_shape);
  if (auto node = autograd::make_node<MmBackward>({a_orig, b})) {
    node->precision = p;
    node->a = std::move(ao);
    node->b = std::move(bo);
    node->a_shape = a_orig.shape();
    autograd::set_history(out, node);
  }
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  Operand ao = make_operand(a), bo = make_operand(b);
  const int64_t batch = a.size(0), m = ao.rows, k = ao.cols, n = bo.cols;
  const Device d = dispatch::common_device("matmul", {&a, &b});
  Tensor out = empty({batch, m, n}, DType::f32, d);
  const MatmulPrecision p = matmul_precision();
  batched_gemm(
      d, p, batch, m, n, k, [&](int64_t i) { return ao.at(i); },
      [&](int64_t i) { return bo.at(i); }, out.data<float>());
  if (auto node = autograd::make_node<BmmBackward>({a, b})) {
    node->precision = p;
    node->a = std::move(ao);
    node->b = std::move(bo);
    node->batch = batch;
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_f32(a, "matmul", "a");
  check_f32(b, "matmul", "b");
  const Shape &as = a.shape(), &bs = b.shape();
  const bool ranks_ok = (a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() <= a.dim());
  COHORT_CHECK_ARG(ranks_ok && b.dim() >= 2, "matmul: unsupported ranks: a ", shape_str(as),
                   " and b ", shape_str(bs), " (supported: 2-D x 2-D, 3-D x 3-D, 3-D x 2-D)");
  COHORT_CHECK_ARG(as.back() == bs[bs.size() - 2], "matmul: a ", shape_str(as), " and b ",
                   shape_str(bs), " do not match (a's last dim ", as.back(), " vs b's dim ",
                   bs.size() - 2, " of size ", bs[bs.size() - 2], ")");
  if (a.dim() == 3 && b.dim() == 3) {
    COHORT_CHECK_ARG(as[0] == bs[0], "matmul: batch sizes differ: a ", shape_str(as), " and b ",
                     shape_str(bs));
    return bmm(a, b);
  }
  if (a.dim() == 2) return mm(a, b, a, {as[0], bs[1]});
  return mm(as_rows(a), b, a, {as[0], as[1], bs[1]});  // [B, M, K] x [K, N]: one gemm
}

// Forward is one sgemm: y pre-filled with the bias rows, then y = x W^T + y (beta = 1).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_f32(x, "linear", "x");
  check_f32(weight, "linear", "weight");
  COHORT_CHECK_ARG(weight.dim() == 2,
                   "linear: weight must be 2-D [out_features, in_features], got ",
                   shape_str(weight.shape()));
  const int64_t out = weight.size(0), in = weight.size(1);
  COHORT_CHECK_ARG(x.dim() >= 1 && x.size(-1) == in, "linear: x ", shape_str(x.shape()),
                   " does not match weight ", shape_str(weight.shape()), " (in_features ", in, ")");
  Tensor b;
  if (bias.defined()) {
    check_f32(bias, "linear", "bias");
    COHORT_CHECK_ARG(bias.dim() == 1 && bias.size(0) == out, "linear: bias ",
                     shape_str(bias.shape()), " does not match weight ", shape_str(weight.shape()),
                     " (out_features ", out, ")");
    b = bias.contiguous_raw();
  }
  Operand xo = make_operand(as_rows(x)), wo = make_operand(weight);
  const int64_t rows = xo.rows;
  const Device d = dispatch::common_device("linear", {&x, &weight, &bias});
  const dispatch::KernelTable& kt = dispatch::kernels_for(d);
  Tensor y = empty({rows, out}, DType::f32, d);
  float* yp = y.data<float>();
  if (b.defined()) kt.fill_rows(d, yp, b.data<float>(), rows, out);
  const MatmulPrecision p = matmul_precision();
  gemm_for(kt, d, p)(d, rows, out, in, 1.0f, xo.at(0), wo.at_t(0), b.defined() ? 1.0f : 0.0f, yp,
                     std::max<int64_t>(out, 1));
  Shape out_shape = x.shape();
  out_shape.back() = out;
  y = view_as_shape(y, out_shape);
  if (auto node = autograd::make_node<LinearBackward>({x, weight, bias})) {
    node->precision = p;
    node->x = std::move(xo);
    node->w = std::move(wo);
    node->x_shape = x.shape();
    autograd::set_history(y, node);
  }
  return y;
}

MatmulPrecision matmul_precision() {
  return g_precision.load(std::memory_order_relaxed);
}

MatmulPrecisionScope::MatmulPrecisionScope(MatmulPrecision p) : before_(matmul_precision()) {
  g_precision.store(p, std::memory_order_relaxed);
}

MatmulPrecisionScope::~MatmulPrecisionScope() {
  g_precision.store(before_, std::memory_order_relaxed);
}

}  // namespace cohort::ops
