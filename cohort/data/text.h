#pragma once
// Byte-level language-modelling data: a text file as a sequence of byte tokens (vocabulary 256),
// cut into a training split and a validation split taken from the end of the file.
//
// A sample is a window of block_size + 1 bytes starting at s:
//   x = bytes[s : s + T]           int64 [T]
//   y = bytes[s + 1 : s + T + 1]   int64 [T]   (the next byte at each position)
// Training: windows at every offset (stride 1), usually drawn at random per step with
// random_batch(seed, step), so that a resumed run draws exactly the batches it would have. A
// step's rows form one global batch, row g a function of (seed, step, g) alone: each worker
// draws its own range of rows (first_row), so the rows a step sees do not depend on how the
// global batch is split over workers and micro-batches.
// Validation: non-overlapping windows (stride T), a fixed set read in order.
#include <memory>
#include <string>

#include "cohort/data/dataset.h"

namespace cohort::data {

struct TextOptions {
  int64_t block_size = 256;   // T
  double val_fraction = 0.1;  // share of the bytes, from the end, held out for validation
};

enum class TextSplit { kTrain, kValidation };
struct TextSplits;

class TextDataset final : public Dataset {
 public:
  static constexpr int64_t kVocabSize = 256;

  // Reads `path` (once per call) and returns one split. Throws IoError when it cannot be read,
  // InvalidArgument when it is shorter than block_size + 2 bytes or a split has no window.
  static TextDataset load(const std::string& path, TextSplit split,
                          const TextOptions& options = {});

  // Windows in this split: start s = i * stride for i in [0, size()).
  int64_t size() const override;
  // x int64 [B, T], y int64 [B, T].
  Batch get_batch(std::span<const int64_t> indices) const override;
  // B windows at uniformly random offsets: rows first_row .. first_row + B - 1 of step's global
  // batch, row g's offset a function of (seed, step, g) only.
  Batch random_batch(int64_t batch, uint64_t seed, int64_t step, int64_t first_row = 0) const;

  int64_t block_size() const { return block_; }
  int64_t stride() const { return stride_; }
  int64_t num_bytes() const { return end_ - begin_; }  // bytes in this split
  const std::string& path() const { return path_; }

 private:
  friend TextSplits load_text(const std::string& path, const TextOptions& options);
  TextDataset(std::shared_ptr<const std::string> bytes, std::string path, int64_t begin,
              int64_t end, int64_t block, int64_t stride);
  void fill(std::span<const int64_t> starts, Batch& out) const;  // starts: split-relative

  std::shared_ptr<const std::string> bytes_;  // the whole file, shared by both splits
  std::string path_;
  int64_t begin_, end_;  // this split's byte range
  int64_t block_;
  int64_t stride_;
};

struct TextSplits {
  TextDataset train;
  TextDataset validation;
};
// Both splits over one read of the file.
TextSplits load_text(const std::string& path, const TextOptions& options = {});

struct KjvOptions {
  // Where the plain-text copy is kept; empty: $XDG_CACHE_HOME/cohort, else ~/.cache/cohort.
  std::string cache_dir = "";
  // Debian's bible-kjv program, which prints the text from its compressed database.
  std::string program = "/usr/bin/bible";
};

// The King James Bible as plain text (4.3 MB), the default corpus. Returns the cached copy at
// <cache_dir>/kjv.txt, creating it first if missing: the program's output goes to a temporary
// file that is renamed into place, so concurrent callers (ranks) never see a partial file.
// Throws IoError naming the package to install when the program is missing.
std::string kjv_path(const KjvOptions& options = {});

}  // namespace cohort::data
