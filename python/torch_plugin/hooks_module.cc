// The extension module cohort.torch._hooks: the arithmetic of cohort.torch.hooks (DDP comm
// hooks for torch's DistributedDataParallel) on cohort's C++ codecs. Python moves the bytes
// (torch.distributed on the DDP's own process group) and keeps the state; every float that is
// encoded, decoded, multiplied or carried as error feedback is handled here.
//
// Arrays cross as NumPy views of torch's CPU tensors (tensor.numpy(), no copy), so this module
// needs neither torch's headers nor libtorch: it builds in seconds next to the c10d plugin. Every
// array must already be C-contiguous with the exact dtype: the functions write in place, and a
// silent conversion would write to a copy.
//
//   Codec("topk", ratio=0.01)       compress::make_compressor: fp16, bf16, topk, randomk,
//                                   signsgd, qsgd (compress/compressor.h)
//     .encode(grad, message, round, scale, residual=None)   residual: error feedback, in place
//     .decode_add(message, round, out) / .decode_gathered(messages [world, bytes], round, out)
//   powersgd_p / powersgd_q / powersgd_out   PowerSGD's three products (parallel/ddp/low_rank.h)
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "cohort/compress/compressor.h"
#include "cohort/core/error.h"
#include "cohort/kernels/cpu/gemm.h"
#include "cohort/parallel/ddp/low_rank.h"

namespace py = pybind11;

namespace cohort::torch_plugin {
namespace {

using cpu::MatRef;
using cpu::Trans;

// An in-place operand: C-contiguous, of element type T, `ndim` dimensions (0: any).
template <typename T>
T* data_of(py::array& a, const char* what, int ndim = 0) {
  COHORT_CHECK_ARG(py::isinstance<py::array_t<T>>(a), "cohort.torch.hooks: ", what, " has dtype ",
                   std::string(py::str(a.dtype())), ", expected ",
                   std::string(py::str(py::dtype::of<T>())));
  COHORT_CHECK_ARG(a.flags() & py::array::c_style, "cohort.torch.hooks: ", what,
                   " is not contiguous");
  COHORT_CHECK_ARG(a.writeable(), "cohort.torch.hooks: ", what, " is read-only");
  COHORT_CHECK_ARG(ndim == 0 || a.ndim() == ndim, "cohort.torch.hooks: ", what, " has ", a.ndim(),
                   " dimensions, expected ", ndim);
  return static_cast<T*>(a.mutable_data());
}

std::span<float> floats(py::array& a, const char* what) {
  return {data_of<float>(a, what), size_t(a.size())};
}

std::span<uint8_t> bytes(py::array& a, const char* what) {
  return {data_of<uint8_t>(a, what), size_t(a.size())};
}

// One codec of compress/ and its options, as the hooks use it: encode a bucket (with or without
// error feedback), decode one message or every rank's gathered messages.
class Codec {
 public:
  Codec(const std::string& method, double ratio, int levels, uint64_t seed)
      : codec_(compress::make_compressor({.method = compress::parse_method(method, "method"),
                                          .ratio = ratio,
                                          .seed = seed,
                                          .levels = levels})) {}

  size_t message_bytes(size_t numel) const { return codec_->message_bytes(numel); }
  bool gathers() const { return codec_->combine() == compress::Combine::kGather; }

  // residual (same size as grad): residual += grad, grad + residual is encoded and residual
  // keeps what was not sent (compress::Residual's arithmetic, on the caller's array).
  void encode(py::array grad, py::array message, uint64_t round, float scale,
              std::optional<py::array> residual) {
    std::span<float> g = floats(grad, "grad");
    std::span<uint8_t> m = bytes(message, "message");
    const compress::CodecContext ctx{.round = round, .scale = scale};
    if (!residual) {
      py::gil_scoped_release unlocked;
      codec_->encode(g, m, ctx, nullptr);
      return;
    }
    std::span<float> r = floats(*residual, "residual");
    COHORT_CHECK_ARG(r.size() == g.size(), "cohort.torch.hooks: the residual holds ", r.size(),
                     " values, the gradient ", g.size());
    py::gil_scoped_release unlocked;
    compress::Residual state;
    state.assign({r.begin(), r.end()});
    codec_->encode(g, m, ctx, &state);
    std::copy(state.values().begin(), state.values().end(), r.begin());
  }

  void decode_add(py::array message, uint64_t round, py::array out) {
    std::span<uint8_t> m = bytes(message, "message");
    std::span<float> o = floats(out, "out");
    py::gil_scoped_release unlocked;
    codec_->decode_add(m, {.round = round}, o);
  }

  // out = the sum of every row's decoded message (a combine-by-gather codec's exchange).
  void decode_gathered(py::array messages, uint64_t round, py::array out) {
    uint8_t* m = data_of<uint8_t>(messages, "messages", 2);
    std::span<float> o = floats(out, "out");
    const auto rows = size_t(messages.shape(0)), row_bytes = size_t(messages.shape(1));
    py::gil_scoped_release unlocked;
    std::fill(o.begin(), o.end(), 0.0f);
    for (size_t k = 0; k < rows; ++k)
      codec_->decode_add({m + k * row_bytes, row_bytes}, {.round = round}, o);
  }

 private:
  std::unique_ptr<compress::Compressor> codec_;
};

// A [rows, cols] float32 matrix operand.
struct Mat {
  float* data;
  int64_t rows, cols;
};

Mat matrix(py::array& a, const char* what) {
  float* d = data_of<float>(a, what, 2);
  return {d, int64_t(a.shape(0)), int64_t(a.shape(1))};
}

void check_dims(bool ok, const char* op, const Mat& m, const Mat& a, const Mat& b) {
  COHORT_CHECK_ARG(ok, "cohort.torch.hooks.", op, ": shapes [", m.rows, ", ", m.cols, "], [",
                   a.rows, ", ", a.cols, "], [", b.rows, ", ", b.cols, "] do not fit");
}

// PowerSGD's first product: Q orthogonalized in place (as torch's powerSGD_hook does before
// every use), then P = M Q. M [n, m], Q [m, r], P [n, r].
void powersgd_p(py::array m, py::array q, py::array p) {
  Mat M = matrix(m, "M"), Q = matrix(q, "Q"), P = matrix(p, "P");
  check_dims(Q.rows == M.cols && P.rows == M.rows && P.cols == Q.cols, "powersgd_p", M, Q, P);
  py::gil_scoped_release unlocked;
  parallel::low_rank::orthogonalize_columns(Q.data, Q.rows, Q.cols);
  cpu::sgemm(M.rows, Q.cols, M.cols, 1.0f, MatRef{M.data, M.cols}, MatRef{Q.data, Q.cols}, 0.0f,
             P.data, P.cols);
}

// The second: the allreduced P orthogonalized in place, then Q = M^T P.
void powersgd_q(py::array m, py::array p, py::array q) {
  Mat M = matrix(m, "M"), P = matrix(p, "P"), Q = matrix(q, "Q");
  check_dims(P.rows == M.rows && Q.rows == M.cols && Q.cols == P.cols, "powersgd_q", M, P, Q);
  py::gil_scoped_release unlocked;
  parallel::low_rank::orthogonalize_columns(P.data, P.rows, P.cols);
  cpu::sgemm(M.cols, P.cols, M.rows, 1.0f, MatRef{M.data, M.cols, Trans::kYes},
             MatRef{P.data, P.cols}, 0.0f, Q.data, Q.cols);
}

// The last: out = P Q^T (Q already averaged); with error feedback residual -= out, residual
// having held M = gradient + the previous residual.
void powersgd_out(py::array p, py::array q, py::array out, std::optional<py::array> residual) {
  Mat P = matrix(p, "P"), Q = matrix(q, "Q"), O = matrix(out, "out");
  check_dims(O.rows == P.rows && O.cols == Q.rows && P.cols == Q.cols, "powersgd_out", P, Q, O);
  float* r = nullptr;
  if (residual) {
    Mat R = matrix(*residual, "residual");
    check_dims(R.rows == O.rows && R.cols == O.cols, "powersgd_out", P, Q, R);
    r = R.data;
  }
  py::gil_scoped_release unlocked;
  cpu::sgemm(O.rows, O.cols, P.cols, 1.0f, MatRef{P.data, P.cols},
             MatRef{Q.data, Q.cols, Trans::kYes}, 0.0f, O.data, O.cols);
  if (r == nullptr) return;
  for (int64_t i = 0; i < O.rows * O.cols; ++i) r[i] -= O.data[i];
}

// acc += x: error feedback's accumulation (PowerSGD's M = residual + gradient).
void add_into(py::array acc, py::array x) {
  std::span<float> a = floats(acc, "acc"), b = floats(x, "x");
  COHORT_CHECK_ARG(a.size() == b.size(), "cohort.torch.hooks: add_into of ", b.size(),
                   " values into ", a.size());
  py::gil_scoped_release unlocked;
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
}

}  // namespace
}  // namespace cohort::torch_plugin

PYBIND11_MODULE(_hooks, m) {
  using namespace cohort::torch_plugin;
  m.doc() = "cohort's codecs for cohort.torch.hooks (DDP comm hooks); NumPy views in, in place";
  // A wrong argument is the caller's: ValueError, as the Python side raises for its own checks.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const cohort::InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const cohort::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  py::class_<Codec>(m, "Codec")
      .def(py::init<const std::string&, double, int, uint64_t>(), py::arg("method"),
           py::arg("ratio") = 0.01, py::arg("levels") = 8, py::arg("seed") = 0)
      .def("message_bytes", &Codec::message_bytes, py::arg("numel"))
      .def_property_readonly("gathers", &Codec::gathers,
                             "True: messages are all-gathered (topk, qsgd, signsgd); False: "
                             "summed by an allreduce in their 16-bit type (fp16, bf16)")
      .def("encode", &Codec::encode, py::arg("grad"), py::arg("message"), py::arg("round"),
           py::arg("scale"), py::arg("residual") = py::none())
      .def("decode_add", &Codec::decode_add, py::arg("message"), py::arg("round"), py::arg("out"))
      .def("decode_gathered", &Codec::decode_gathered, py::arg("messages"), py::arg("round"),
           py::arg("out"));
  m.def("powersgd_p", &powersgd_p, py::arg("m"), py::arg("q"), py::arg("p"));
  m.def("powersgd_q", &powersgd_q, py::arg("m"), py::arg("p"), py::arg("q"));
  m.def("powersgd_out", &powersgd_out, py::arg("p"), py::arg("q"), py::arg("out"),
        py::arg("residual") = py::none());
  m.def("add_into", &add_into, py::arg("acc"), py::arg("x"));
}
