#include "cohort/data/text.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cohort/core/rng.h"

namespace cohort::data {
namespace {

int64_t windows_in(int64_t bytes, int64_t block, int64_t stride) {
  return bytes >= block + 1 ? (bytes - block - 1) / stride + 1 : 0;
}

std::shared_ptr<const std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  COHORT_CHECK_IO(in.is_open(), "cannot open text file ", path, ": ", std::strerror(errno));
  std::ostringstream os;
  os << in.rdbuf();
  COHORT_CHECK_IO(!in.bad(), "reading text file ", path, " failed");
  return std::make_shared<const std::string>(std::move(os).str());
}

}  // namespace

TextDataset::TextDataset(std::shared_ptr<const std::string> bytes, std::string path, int64_t begin,
                         int64_t end, int64_t block, int64_t stride)
    : bytes_(std::move(bytes)),
      path_(std::move(path)),
      begin_(begin),
      end_(end),
      block_(block),
      stride_(stride) {}

TextSplits load_text(const std::string& path, const TextOptions& options) {
  const int64_t t = options.block_size;
  COHORT_CHECK_ARG(t >= 1, "text dataset ", path, ": block_size ", t, " must be >= 1");
  COHORT_CHECK_ARG(options.val_fraction >= 0 && options.val_fraction < 1, "text dataset ", path,
                   ": val_fraction ", options.val_fraction, " must be in [0, 1)");
  auto bytes = read_file(path);
  const int64_t n = int64_t(bytes->size());
  COHORT_CHECK_ARG(n >= t + 2, "text file ", path, " holds ", n,
                   " bytes, too small for block_size ", t, " (need at least ", t + 2, ")");
  const int64_t n_val = int64_t(double(n) * options.val_fraction);
  const int64_t n_train = n - n_val;
  COHORT_CHECK_ARG(n_train >= t + 1, "text file ", path, ": the training split holds ", n_train,
                   " bytes, fewer than one window of block_size + 1 = ", t + 1, " (val_fraction ",
                   options.val_fraction, ")");
  COHORT_CHECK_ARG(n_val == 0 || n_val >= t + 1, "text file ", path,
                   ": the validation split holds ", n_val,
                   " bytes, fewer than one window of block_size + 1 = ", t + 1, " (val_fraction ",
                   options.val_fraction, ")");
  return TextSplits{TextDataset(bytes, path, 0, n_train, t, 1),
                    TextDataset(bytes, path, n_train, n, t, t)};
}

TextDataset TextDataset::load(const std::string& path, TextSplit split,
                              const TextOptions& options) {
  TextSplits s = load_text(path, options);
  return split == TextSplit::kTrain ? std::move(s.train) : std::move(s.validation);
}

int64_t TextDataset::size() const {
  return windows_in(num_bytes(), block_, stride_);
}

// x[b, t] = bytes[start_b + t], y[b, t] = bytes[start_b + t + 1]; shapes [B, T].
void TextDataset::fill(std::span<const int64_t> starts, Batch& out) const {
  const int64_t t_len = block_;
  const auto* base = reinterpret_cast<const uint8_t*>(bytes_->data()) + begin_;
  int64_t* x = out.x.data<int64_t>();
  int64_t* y = out.y.data<int64_t>();
  for (size_t b = 0; b < starts.size(); ++b) {
    const uint8_t* w = base + starts[b];
    for (int64_t t = 0; t < t_len; ++t) x[t] = w[t];
    for (int64_t t = 0; t < t_len; ++t) y[t] = w[t + 1];
    x += t_len;
    y += t_len;
  }
}

Batch TextDataset::get_batch(std::span<const int64_t> indices) const {
  check_batch_indices(indices, size(), "text dataset " + path_);
  const int64_t b = int64_t(indices.size());
  std::vector<int64_t> starts(indices.begin(), indices.end());
  for (int64_t& s : starts) s *= stride_;
  Batch out{empty({b, block_}, DType::i64), empty({b, block_}, DType::i64)};
  fill(starts, out);
  return out;
}

Batch TextDataset::random_batch(int64_t batch, uint64_t seed, int64_t step,
                                int64_t first_row) const {
  COHORT_CHECK_ARG(batch >= 1, "text dataset ", path_, ": random_batch(", batch,
                   ") needs batch >= 1");
  COHORT_CHECK_ARG(first_row >= 0, "text dataset ", path_, ": random_batch first_row ", first_row,
                   " must be >= 0");
  const int64_t offsets = num_bytes() - block_;  // start positions with a full window
  COHORT_CHECK_ARG(offsets >= 1, "text dataset ", path_, ": split holds ", num_bytes(),
                   " bytes, no window of block_size + 1 = ", block_ + 1);
  Philox rng(seed);
  std::vector<int64_t> starts(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    Philox::Block r = rng.block(uint64_t(first_row + b), uint64_t(step));
    uint64_t u = (uint64_t(r[1]) << 32) | r[0];
    starts[size_t(b)] = int64_t((static_cast<unsigned __int128>(u) * uint64_t(offsets)) >> 64);
  }
  Batch out{empty({batch, block_}, DType::i64), empty({batch, block_}, DType::i64)};
  fill(starts, out);
  return out;
}

}  // namespace cohort::data
