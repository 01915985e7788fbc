#pragma once
// The memory a collective works on, taken from a Python object without a copy:
//   - any object with the buffer protocol (NumPy arrays, memoryview, bytearray, array.array),
//     C-contiguous, and writable where the operation writes it;
//   - a torch CPU tensor, duck-typed (data_ptr(), numel(), dtype, device, is_contiguous()):
//     torch tensors do not export the buffer protocol, and the core never imports torch.
// Anything else, a non-contiguous or read-only buffer, or an element type comm/ does not move
// is an InvalidArgument naming the operation and the argument.
#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <string>

#include "cohort/comm/types.h"

namespace cohort::pybind {

enum class Access { kRead, kWrite };

class BufferArg {
 public:
  // `op` and `arg` name the call in errors ("allreduce", "tensor"). `dtype` (from the call's
  // dtype= argument) reinterprets the elements, e.g. a uint16 array as bf16; its size must be
  // the element size of the buffer.
  static std::shared_ptr<BufferArg> from(pybind11::handle obj, const char* op, const char* arg,
                                         Access access, std::optional<comm::DType> dtype);
  ~BufferArg();
  BufferArg(const BufferArg&) = delete;
  BufferArg& operator=(const BufferArg&) = delete;

  void* data() const { return data_; }
  size_t count() const { return count_; }
  comm::DType dtype() const { return dtype_; }

 private:
  BufferArg() = default;
  void* data_ = nullptr;
  size_t count_ = 0;
  comm::DType dtype_ = comm::DType::f32;
  pybind11::object owner_;  // keeps the array or tensor alive
  Py_buffer view_{};        // the buffer export, released with the object (buffer protocol only)
  bool has_view_ = false;
};

// "f32", "float32", "bf16", "bfloat16", "int64", ... -> DType; InvalidArgument naming `what`.
comm::DType parse_dtype(const std::string& name, const char* what);

}  // namespace cohort::pybind
