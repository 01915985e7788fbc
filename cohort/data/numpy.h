#pragma once
// A labelled data set from NumPy files: a .npz archive holding arrays x and y (np.savez or
// np.savez_compressed), or a directory holding x.npy and y.npy (np.save).
//
// Arrays are read in place, never converted whole: a .npy file and a stored .npz member
// (np.savez) are memory-mapped read-only, so a data set larger than memory streams from the
// page cache; a deflated member (np.savez_compressed) is inflated into memory once, in the
// constructor. get_batch converts the rows it is asked for straight into the float32 batch.
// Every copy of the data set shares the mapping, which is unmapped when the last copy goes.
// The pages read do not pile up in the process's resident set: every 32 MiB or so of the file
// read, they are dropped from it (they stay in the page cache; mapped_reads.h). A deflated
// member is in memory whole for the data set's life: a data set larger than memory needs
// np.savez (stored members) or .npy files.
// A mapped file must not be rewritten in place while in use (the process would die of SIGBUS
// on a page that is gone): write a new file and rename it over the old one.
//
// Accepted: little-endian, C-order arrays. x [N, ...] float32, float64, uint8, int64 or int32;
// y [N] int64, int32, uint8 or bool, every label >= 0. Anything else (big-endian, Fortran
// order, object or structured dtypes, 0-d arrays, mismatched N) is refused in the constructor
// with an error naming the file, the member ("data.npz:x.npy") and what was expected.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cohort/data/labeled.h"

namespace cohort::data {

struct NumpyOptions {
  // A .npz holding arrays `x_key` and `y_key`, or a directory holding `x_key`.npy and
  // `y_key`.npy.
  std::string path;
  std::string x_key = "x";  // inputs [N, ...]: float32, float64, uint8, int64, int32
  std::string y_key = "y";  // labels [N]: int64, int32, uint8, bool (non-negative)
  Standardize standardize;  // x = (value - mean) / std, after conversion to float
};

class NumpyDataset final : public LabeledDataset {
 public:
  // Throws IoError when the path, a file or a member's bytes are missing or cut short;
  // InvalidArgument when an array is not one this data set reads (see above) or a key is absent.
  explicit NumpyDataset(const NumpyOptions& options);

  int64_t size() const override;
  // x float32 [B, sample_shape...], y int64 [B].
  Batch get_batch(std::span<const int64_t> indices) const override;
  const Shape& sample_shape() const override;  // x's shape without its first dim
  int64_t num_classes() const override;        // 1 + the largest label
  const std::string& path() const;

  // The arrays and their mapping; public only so that the .cc can name it.
  struct Data;

 private:
  std::shared_ptr<const Data> data_;
  float scale_;  // 1 / std
  float bias_;   // -mean / std
};

// Whether the data set at `path` holds an array named `key`: a member `key`.npy (or `key`) of a
// .npz, or a file `key`.npy in a directory. For an optional split, e.g. "x_test". Throws
// IoError when `path` does not exist, InvalidArgument when it is neither a directory nor a zip.
bool npz_has(const std::string& path, const std::string& key);

}  // namespace cohort::data
