#include "python/src/buffer.h"

#include <string_view>

#include "cohort/core/error.h"

namespace py = pybind11;

namespace cohort::pybind {
namespace {

constexpr const char* kSupported =
    "float32, float64, float16, bfloat16, int32, int64, uint8 (f32 f64 f16 bf16 i32 i64 u8)";

struct DTypeName {
  std::string_view name;
  comm::DType dtype;
};
// Every spelling a user may pass as dtype= or that str(torch_tensor.dtype) gives.
constexpr DTypeName kNames[] = {
    {"f32", comm::DType::f32},   {"float32", comm::DType::f32},   {"float", comm::DType::f32},
    {"f64", comm::DType::f64},   {"float64", comm::DType::f64},   {"double", comm::DType::f64},
    {"f16", comm::DType::f16},   {"float16", comm::DType::f16},   {"half", comm::DType::f16},
    {"bf16", comm::DType::bf16}, {"bfloat16", comm::DType::bf16}, {"i32", comm::DType::i32},
    {"int32", comm::DType::i32}, {"int", comm::DType::i32},       {"i64", comm::DType::i64},
    {"int64", comm::DType::i64}, {"long", comm::DType::i64},      {"u8", comm::DType::u8},
    {"uint8", comm::DType::u8},
};

std::optional<comm::DType> lookup_dtype(std::string_view name) {
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  for (const DTypeName& n : kNames)
    if (n.name == name) return n.dtype;
  return std::nullopt;
}

// The DType of a buffer-protocol format string ("f", "<d", "e", "q", "B", ...), by kind and
// size as NumPy exports them; nullopt for the rest (bool, unsigned > 8 bits, complex, structs).
std::optional<comm::DType> format_dtype(std::string_view fmt, size_t itemsize) {
  if (!fmt.empty() && (fmt[0] == '@' || fmt[0] == '=' || fmt[0] == '<')) fmt.remove_prefix(1);
  if (fmt.size() != 1) return std::nullopt;
  switch (fmt[0]) {
    case 'f':
      return comm::DType::f32;
    case 'd':
      return comm::DType::f64;
    case 'e':
      return comm::DType::f16;
    case 'B':
      return comm::DType::u8;
    case 'i':
    case 'l':
    case 'q':
      if (itemsize == 4) return comm::DType::i32;
      if (itemsize == 8) return comm::DType::i64;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

// Applies the dtype= override (same element size) or rejects an unsupported element type.
comm::DType resolve_dtype(std::optional<comm::DType> found, std::optional<comm::DType> forced,
                          size_t itemsize, const std::string& what, const std::string& type) {
  if (forced) {
    COHORT_CHECK_ARG(comm::dtype_size(*forced) == itemsize, what,
                     ": dtype=", comm::dtype_short_name(*forced), " has ",
                     comm::dtype_size(*forced), "-byte elements but the buffer's are ", itemsize,
                     " bytes (", type, ")");
    return *forced;
  }
  COHORT_CHECK_ARG(found.has_value(), what, ": element type ", type,
                   " is not one cohort moves; supported: ", kSupported,
                   " (a uint16 array can be passed as bf16 with dtype='bf16')");
  return *found;
}

bool is_torch_tensor(py::handle obj) {
  return py::hasattr(obj, "data_ptr") && py::hasattr(obj, "numel") &&
         py::hasattr(obj, "is_contiguous") && py::hasattr(obj, "device");
}

}  // namespace

comm::DType parse_dtype(const std::string& name, const char* what) {
  std::optional<comm::DType> d = lookup_dtype(name);
  COHORT_CHECK_ARG(d.has_value(), what, ": unknown dtype '", name, "'; supported: ", kSupported);
  return *d;
}

BufferArg::~BufferArg() {
  if (!has_view_ && !owner_) return;
  py::gil_scoped_acquire gil;  // the buffer export and the reference are Python's
  if (has_view_) PyBuffer_Release(&view_);
  owner_ = py::object();
}

std::shared_ptr<BufferArg> BufferArg::from(py::handle obj, const char* op, const char* arg,
                                           Access access, std::optional<comm::DType> dtype) {
  const std::string what = std::string(op) + ": argument '" + arg + "'";
  const std::string type = py::str(py::type::handle_of(obj).attr("__name__"));
  std::shared_ptr<BufferArg> b(new BufferArg());
  b->owner_ = py::reinterpret_borrow<py::object>(obj);
  if (PyObject_CheckBuffer(obj.ptr())) {
    // Ask for strides and format without demanding contiguity or writability, so the errors
    // below can say what is wrong in cohort's words instead of NumPy's BufferError.
    if (PyObject_GetBuffer(obj.ptr(), &b->view_, PyBUF_RECORDS_RO) != 0)
      throw py::error_already_set();
    b->has_view_ = true;
    const Py_buffer& v = b->view_;
    COHORT_CHECK_ARG(PyBuffer_IsContiguous(&v, 'C'), what, " (", type,
                     ") is not C-contiguous: collectives work in place on contiguous memory; "
                     "pass numpy.ascontiguousarray(x) and copy the result back");
    COHORT_CHECK_ARG(access == Access::kRead || !v.readonly, what, " (", type,
                     ") is read-only, but ", op, " writes its result into it");
    std::string fmt = v.format ? v.format : "B";
    // NumPy's name for the element type where there is one ("bool"), else the format code.
    std::string elem = py::hasattr(obj, "dtype") ? std::string(py::str(obj.attr("dtype")))
                                                 : "format '" + fmt + "'";
    b->dtype_ = resolve_dtype(format_dtype(fmt, size_t(v.itemsize)), dtype, size_t(v.itemsize),
                              what, elem + " (" + type + ")");
    b->data_ = v.buf;
    b->count_ = size_t(v.len / v.itemsize);
    return b;
  }
  COHORT_CHECK_ARG(is_torch_tensor(obj), what, " is a ", type,
                   ": expected a NumPy array, another object with the buffer protocol, or a "
                   "torch CPU tensor");
  std::string device = py::str(obj.attr("device").attr("type"));
  COHORT_CHECK_ARG(device == "cpu", what, " is a tensor on '", device,
                   "': cohort.ProcessGroup moves CPU memory (call .cpu(), or use the "
                   "torch.distributed backend cohort.torch)");
  COHORT_CHECK_ARG(obj.attr("is_contiguous")().cast<bool>(), what,
                   " is a non-contiguous tensor: collectives work in place on contiguous "
                   "memory; pass x.contiguous() and copy the result back");
  std::string tname = py::str(obj.attr("dtype"));
  size_t itemsize = obj.attr("element_size")().cast<size_t>();
  b->dtype_ = resolve_dtype(lookup_dtype(tname), dtype, itemsize, what, tname);
  b->data_ = reinterpret_cast<void*>(obj.attr("data_ptr")().cast<uintptr_t>());
  b->count_ = obj.attr("numel")().cast<size_t>();
  return b;
}

}  // namespace cohort::pybind
