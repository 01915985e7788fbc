#pragma once
// A labelled data set from a CSV file the user brings, which may be larger than memory.
//
// The constructor reads the file once, in 1 MiB chunks, validates every row fully (so that a
// bad value stops the run before training starts, naming its line) and keeps only what it
// needs to find a row again: its byte offset (8 bytes a row) and its label (8 bytes a row).
// get_batch then reads just the rows it is asked for with pread() on one descriptor that all
// copies of the data set share, and parses them straight into the output tensor.
//
// Accepted: LF or CRLF line endings, a last line without a newline, blank lines at the end,
// spaces around fields, double-quoted fields ("pixel1", with "" for a quote inside; a quoted
// field cannot span lines), a UTF-8 byte-order mark, numbers std::from_chars reads (1e-3,
// -0.5, 255, .5) with an optional leading '+'. Rejected, naming file:line: a blank line before
// more data, a row with another field count than line 1, an empty or non-numeric or non-finite
// feature, a label that is not a non-negative integer ("3" and "3.0" are integers).
// Fields are counted from 1 in messages (as awk and cut do); label_column counts from 0.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cohort/data/labeled.h"

namespace cohort::data {

struct CsvOptions {
  std::string path;  // the file
  // Which column is the label: "" = the last one; a header name (needs a header row); or a
  // 0-based column number ("0"). A header name wins over a number it also spells.
  std::string label_column = "";
  // "auto": the first row is a header when any of its fields is not a number; "true"; "false".
  std::string header = "auto";
  char delimiter = ',';
  Standardize standardize;  // applied to every feature (labeled.h)
  // Optional: each row's features reshaped to this (e.g. {1, 28, 28}); its product must equal
  // the feature count.
  Shape shape = {};
};

class CsvDataset final : public LabeledDataset {
 public:
  explicit CsvDataset(const CsvOptions& options);

  int64_t size() const override;
  // x float32 [B, sample_shape...] = (value - mean) / std; y int64 [B]. Safe to call from
  // several threads at once: it only reads shared state, and pread() keeps no file position.
  Batch get_batch(std::span<const int64_t> indices) const override;
  const Shape& sample_shape() const override;  // {features}, or options.shape
  int64_t num_classes() const override;        // 1 + the largest label

  int64_t features() const;  // columns other than the label, in file order
  const std::string& path() const;
  // The header's names (unquoted, trimmed), or "0", "1", ... when the file has no header.
  const std::vector<std::string>& column_names() const;

  // The open file and its row index; public only so that helpers in the .cc can name it.
  struct Data;

 private:
  std::shared_ptr<const Data> data_;  // shared by copies: the index may be large
  Shape sample_shape_;
  Standardize standardize_;
};

}  // namespace cohort::data
