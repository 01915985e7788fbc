#pragma once
// One .npy array as numpy.cc reads it (NumpyDataset's parts). In a header, in a named
// namespace, because NumpyDataset::Data (external linkage) holds it: GCC warns about a member
// of an anonymous-namespace type once unity builds include numpy.cc.
#include <cstdint>
#include <memory>
#include <string>

#include "cohort/tensor/tensor.h"

namespace cohort::data::npy_detail {

enum class Elem { kF32, kF64, kU8, kI64, kI32, kBool, kOther };

struct NpyArray {
  std::string where;  // "dir/x.npy" or "data.npz:x.npy", for errors
  std::string descr;  // as the header says it: "<f4"
  Elem elem = Elem::kOther;
  int64_t itemsize = 0;
  Shape shape;
  // Row-major elements. Not necessarily aligned (a zip member starts anywhere), so elements are
  // read with memcpy.
  const uint8_t* data = nullptr;
  std::shared_ptr<const void> owner;  // the mapping or the inflated buffer `data` points into
};

}  // namespace cohort::data::npy_detail
