#include "cohort/data/csv.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string_view>
#include <type_traits>

#include "cohort/core/error.h"

namespace cohort::data {

struct CsvDataset::Data {
  std::string path;
  int fd = -1;
  char delimiter = ',';
  bool has_header = false;
  std::vector<std::string> column_names;
  int64_t label_column = 0;     // 0-based
  int64_t first_data_line = 1;  // the line number of row 0: rows are consecutive lines
  // Row i is the bytes [offsets[i], offsets[i + 1]) of the file: one line and its ending.
  std::vector<uint64_t> offsets;
  std::vector<int64_t> labels;
  int64_t num_classes = 0;

  Data() = default;
  Data(const Data&) = delete;
  Data& operator=(const Data&) = delete;
  ~Data() {
    if (fd >= 0) ::close(fd);
  }
  int64_t rows() const { return int64_t(labels.size()); }
  int64_t columns() const { return int64_t(column_names.size()); }
};

namespace {

using Data = CsvDataset::Data;

constexpr size_t kChunk = size_t(1) << 20;
// No one means a line this long as a CSV row; stopping keeps a binary file (no newlines) from
// being pulled into memory whole.
constexpr size_t kMaxLine = size_t(64) << 20;
// Labels size the model's output layer: anything near this is a wrong label column.
constexpr double kMaxLabel = 2147483647.0;
constexpr std::string_view kBom = "\xEF\xBB\xBF";  // Excel starts its UTF-8 CSVs with it

// The prefix of a message about one line: "data.csv:17: ".
struct Where {
  const std::string& path;
  int64_t line;
};
std::ostream& operator<<(std::ostream& os, const Where& w) {
  return os << w.path << ":" << w.line << ": ";
}

bool is_space(char c, char delimiter) {
  return (c == ' ' || c == '\t') && c != delimiter;
}

std::string_view trim(std::string_view s, char delimiter) {
  while (!s.empty() && is_space(s.front(), delimiter)) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back(), delimiter)) s.remove_suffix(1);
  return s;
}

std::string_view strip_eol(std::string_view s) {
  if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

// A field as quoted in a message: a garbage field may be a whole binary line.
std::string excerpt(std::string_view s) {
  return s.size() <= 40 ? std::string(s) : std::string(s.substr(0, 37)) + "...";
}

// The position of the quote closing the one at `open`, skipping "" (an escaped quote); npos
// when the line ends first.
size_t closing_quote(std::string_view line, size_t open) {
  for (size_t j = open + 1; j < line.size(); ++j) {
    if (line[j] == '"' && (j + 1 == line.size() || line[j + 1] != '"')) return j;
    if (line[j] == '"') ++j;
  }
  return std::string_view::npos;
}

// Splits a line into its trimmed fields. A quoted field keeps its quotes (unquote() and the
// number parser take them off), so that no field needs a copy.
void split(std::string_view line, char delim, const Where& where,
           std::vector<std::string_view>& fields) {
  fields.clear();
  size_t i = 0;
  while (true) {
    while (i < line.size() && is_space(line[i], delim)) ++i;
    if (i < line.size() && line[i] == '"') {
      const size_t close = closing_quote(line, i);
      COHORT_CHECK_ARG(close != std::string_view::npos, where, "field ", fields.size() + 1,
                       " opens a quote that this line does not close (a quoted field cannot "
                       "span lines)");
      fields.push_back(line.substr(i, close + 1 - i));
      i = close + 1;
      while (i < line.size() && is_space(line[i], delim)) ++i;
      COHORT_CHECK_ARG(i == line.size() || line[i] == delim, where, "field ", fields.size(),
                       " has text after its closing quote");
    } else {
      const size_t d = std::min(line.find(delim, i), line.size());
      fields.push_back(trim(line.substr(i, d - i), delim));
      i = d;
    }
    if (i == line.size()) return;
    ++i;  // past the delimiter
  }
}

std::string unquote(std::string_view field) {
  if (field.empty() || field.front() != '"') return std::string(field);
  std::string out;
  for (size_t j = 1; j + 1 < field.size(); ++j) {
    out += field[j];
    if (field[j] == '"') ++j;  // "" stands for one quote
  }
  return out;
}

enum class NumError { kNone, kEmpty, kNotNumber, kNotFinite, kOutOfRange };

// The text of the number a field holds: quotes, the spaces inside them and a leading '+' (which
// std::from_chars refuses) taken off.
std::string_view number_text(std::string_view s, char delimiter) {
  if (s.size() >= 2 && s.front() == '"') s = trim(s.substr(1, s.size() - 2), delimiter);
  if (s.size() >= 2 && s[0] == '+' && s[1] != '+' && s[1] != '-') s.remove_prefix(1);
  return s;
}

// from_chars fails a float beyond float32 in both directions; an underflow (1e-50) is a
// rounding to 0 that any reader of the file would accept, an overflow is not.
NumError float_out_of_range(std::string_view s, float& out) {
  double wide = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), wide);
  out = float(wide);
  return ec == std::errc() && std::isfinite(out) ? NumError::kNone : NumError::kOutOfRange;
}

template <typename T>
NumError parse_number(std::string_view field, char delimiter, T& out) {
  const std::string_view s = number_text(field, delimiter);
  if (s.empty()) return NumError::kEmpty;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc::invalid_argument || ptr != s.data() + s.size()) return NumError::kNotNumber;
  if (ec == std::errc::result_out_of_range) {
    if constexpr (std::is_same_v<T, float>) return float_out_of_range(s, out);
    return NumError::kOutOfRange;
  }
  return std::isfinite(out) ? NumError::kNone : NumError::kNotFinite;
}

float parse_feature(const Data& d, std::string_view field, int64_t j, const Where& where) {
  float v = 0;
  const NumError err = parse_number(field, d.delimiter, v);
  if (err == NumError::kNone) return v;
  const char* why = err == NumError::kEmpty        ? "is empty; expected a number"
                    : err == NumError::kNotFinite  ? "is not finite (NaN or infinity)"
                    : err == NumError::kOutOfRange ? "is out of the range of float32"
                                                   : "is not a number";
  // Fields are numbered either way; a header adds the column's name.
  const std::string name = d.has_header ? " in column '" + d.column_names[size_t(j)] + "'" : "";
  throw InvalidArgument(
      detail::str(where, "field ", j + 1, " ('", excerpt(field), "')", name, " ", why));
}

int64_t parse_label(const Data& d, std::string_view field, int64_t j, const Where& where) {
  double v = 0;
  const NumError err = parse_number(field, d.delimiter, v);
  const std::string column = d.has_header ? detail::str("column '", d.column_names[size_t(j)], "'")
                                          : detail::str("field ", j + 1);
  COHORT_CHECK_ARG(err == NumError::kNone && v >= 0 && v == std::floor(v), where, "label '",
                   excerpt(field), "' in ", column, " is not a non-negative integer");
  COHORT_CHECK_ARG(v <= kMaxLabel, where, "label '", excerpt(field), "' in ", column,
                   " is larger than ", int64_t(kMaxLabel), "; is that the label column?");
  return int64_t(v);
}

// Parses one data row: its features, in file order, into x[0 .. columns - 1); returns its label.
int64_t parse_row(const Data& d, std::string_view line, int64_t line_no,
                  std::vector<std::string_view>& fields, float* x) {
  const Where where{d.path, line_no};
  split(line, d.delimiter, where, fields);
  COHORT_CHECK_ARG(int64_t(fields.size()) == d.columns(), where, "expected ", d.columns(),
                   " fields (as in line 1), got ", fields.size());
  int64_t label = 0;
  for (int64_t j = 0; j < d.columns(); ++j) {
    if (j == d.label_column) {
      label = parse_label(d, fields[size_t(j)], j, where);
    } else {
      *x++ = parse_feature(d, fields[size_t(j)], j, where);
    }
  }
  return label;
}

void open_file(Data& d) {
  d.fd = ::open(d.path.c_str(), O_RDONLY | O_CLOEXEC);
  COHORT_CHECK_IO(d.fd >= 0, "CsvDataset: cannot open ", d.path, ": ", std::strerror(errno));
  struct stat st {};
  COHORT_CHECK_IO(::fstat(d.fd, &st) == 0, "CsvDataset: cannot stat ", d.path, ": ",
                  std::strerror(errno));
  // get_batch reads rows at their offsets again: a pipe or a directory cannot do that.
  COHORT_CHECK_IO(S_ISREG(st.st_mode), "CsvDataset: ", d.path, " is not a regular file");
}

size_t read_some(int fd, char* dst, size_t n, const std::string& path, uint64_t at) {
  while (true) {
    const ssize_t r = ::read(fd, dst, n);
    if (r >= 0) return size_t(r);
    COHORT_CHECK_IO(errno == EINTR, path, ": read failed at byte ", at, ": ", std::strerror(errno));
  }
}

void pread_all(const Data& d, char* dst, size_t n, uint64_t at, const Where& where) {
  for (size_t got = 0; got < n;) {
    const ssize_t r = ::pread(d.fd, dst + got, n - got, off_t(at + got));
    if (r < 0 && errno == EINTR) continue;
    COHORT_CHECK_IO(r >= 0, where, "read failed at byte ", at + got, ": ", std::strerror(errno));
    COHORT_CHECK_IO(r > 0, where, "the file ends at byte ", at + got, ", inside this row; ", d.path,
                    " changed after CsvDataset read it");
    got += size_t(r);
  }
}

// Reads the file front to back in chunks and calls fn(line_number, begin, end, text) for every
// line: [begin, end) are its bytes in the file, line ending included; text is without "\n" or
// "\r\n", and without a byte-order mark on line 1 (begin then skips it too).
template <typename Fn>
void for_each_line(int fd, const std::string& path, Fn&& fn) {
  std::vector<char> buf(kChunk);
  size_t begin = 0, end = 0;  // the bytes not yet handed out: buf[begin, end)
  uint64_t base = 0;          // the file offset of buf[0]
  int64_t line = 0;
  bool eof = false;
  while (true) {
    const void* nl = std::memchr(buf.data() + begin, '\n', end - begin);
    if (nl != nullptr || (eof && begin < end)) {
      const size_t stop = nl ? size_t(static_cast<const char*>(nl) - buf.data()) + 1 : end;
      std::string_view text = strip_eol({buf.data() + begin, stop - begin});
      size_t skip = 0;
      if (++line == 1 && text.starts_with(kBom)) skip = kBom.size();
      fn(line, base + begin + skip, base + stop, text.substr(skip));
      begin = stop;
      continue;
    }
    if (eof) return;
    // Keep the partial line at the front and read more after it; a line as long as the buffer
    // doubles it.
    std::memmove(buf.data(), buf.data() + begin, end - begin);
    base += begin;
    end -= begin;
    begin = 0;
    if (end == buf.size()) {
      COHORT_CHECK_ARG(buf.size() < kMaxLine, Where{path, line + 1}, "the line is longer than ",
                       kMaxLine >> 20, " MiB; is this a CSV file?");
      buf.resize(buf.size() * 2);
    }
    const size_t r = read_some(fd, buf.data() + end, buf.size() - end, path, base + end);
    eof = r == 0;
    end += r;
  }
}

bool decide_header(const std::string& option, const std::vector<std::string_view>& fields,
                   char delimiter) {
  if (option != "auto") return option == "true";
  float unused = 0;
  return std::any_of(fields.begin(), fields.end(), [&](std::string_view f) {
    return parse_number(f, delimiter, unused) == NumError::kNotNumber;
  });
}

// "'a', 'b', ... (775 more)": enough of a header to spot a typo in a name.
std::string names_list(const std::vector<std::string>& names) {
  constexpr size_t kShown = 10;
  std::string s;
  for (size_t j = 0; j < std::min(names.size(), kShown); ++j) {
    s += (j ? ", '" : "'") + names[j] + "'";
  }
  if (names.size() > kShown) s += detail::str(", ... (", names.size() - kShown, " more)");
  return s;
}

// The column a header name picks; -1 when none has it.
int64_t label_by_name(const Data& d, const std::string& spec) {
  const auto& names = d.column_names;
  const auto hit = std::find(names.begin(), names.end(), spec);
  if (hit == names.end()) return -1;
  const auto again = std::find(hit + 1, names.end(), spec);
  COHORT_CHECK_ARG(again == names.end(), "CsvDataset: label_column '", spec, "' names columns ",
                   hit - names.begin(), " and ", again - names.begin(), " of ", d.path,
                   "; give a column number instead");
  return hit - names.begin();
}

int64_t resolve_label_column(const Data& d, const std::string& spec, const std::string& header) {
  if (spec.empty()) return d.columns() - 1;
  if (d.has_header) {
    const int64_t j = label_by_name(d, spec);
    if (j >= 0) return j;
  }
  int64_t j = -1;
  auto [ptr, ec] = std::from_chars(spec.data(), spec.data() + spec.size(), j);
  if (ec == std::errc() && ptr == spec.data() + spec.size()) {
    COHORT_CHECK_ARG(j >= 0 && j < d.columns(), "CsvDataset: label_column ", spec,
                     " is out of range: ", d.path, " has ", d.columns(), " columns (0 .. ",
                     d.columns() - 1, ")");
    return j;
  }
  COHORT_CHECK_ARG(d.has_header, "CsvDataset: label_column '", spec, "' names a column, but ",
                   d.path, " has no header row (",
                   header == "false" ? "header is \"false\"" : "its line 1 is all numbers",
                   "); give a 0-based column number, or set header to \"true\"");
  throw InvalidArgument(detail::str("CsvDataset: label_column '", spec, "' is not a column of ",
                                    d.path, "; its header has ", d.columns(),
                                    " columns: ", names_list(d.column_names)));
}

// Takes the file's lines in order: the first decides the header and the columns, every other
// is a data row, checked in full and remembered by its offset and label.
class Indexer {
 public:
  Indexer(Data& d, const CsvOptions& options) : d_(d), options_(options) {}

  void line(int64_t no, uint64_t begin, uint64_t end, std::string_view text) {
    if (is_blank(text)) {
      if (blank_ == 0) blank_ = no;
      return;
    }
    COHORT_CHECK_ARG(blank_ == 0, Where{d_.path, blank_}, "blank line, but line ", no,
                     " after it holds data; only blank lines at the end of the file are ignored");
    COHORT_CHECK_ARG(text.find('\r') == text.npos, Where{d_.path, no},
                     "a carriage return inside the line (old Mac line endings?); use LF or CRLF");
    if (no == 1 && first_line(text)) return;
    d_.offsets.push_back(begin);
    d_.labels.push_back(parse_row(d_, text, no, fields_, features_.data()));
    end_ = end;
  }

  void finish() {
    COHORT_CHECK_ARG(!d_.labels.empty(), d_.path, ": no data rows (",
                     d_.has_header ? "only a header, line 1"
                     : blank_ > 0  ? "only blank lines"
                                   : "the file is empty",
                     ")");
    d_.offsets.push_back(end_);
    d_.offsets.shrink_to_fit();
    d_.labels.shrink_to_fit();
    d_.num_classes = 1 + *std::max_element(d_.labels.begin(), d_.labels.end());
  }

 private:
  // Sets the columns from line 1; true when it is a header rather than a data row.
  bool first_line(std::string_view text) {
    split(text, d_.delimiter, Where{d_.path, 1}, fields_);
    const int64_t n = int64_t(fields_.size());
    COHORT_CHECK_ARG(n >= 2, Where{d_.path, 1}, "found 1 field with delimiter '", d_.delimiter,
                     "'; a data set needs feature columns and a label column");
    d_.has_header = decide_header(options_.header, fields_, d_.delimiter);
    d_.first_data_line = d_.has_header ? 2 : 1;
    for (int64_t j = 0; j < n; ++j) {
      d_.column_names.push_back(d_.has_header ? unquote(fields_[size_t(j)]) : std::to_string(j));
    }
    d_.label_column = resolve_label_column(d_, options_.label_column, options_.header);
    features_.resize(size_t(n - 1));
    return d_.has_header;
  }

  Data& d_;
  const CsvOptions& options_;
  int64_t blank_ = 0;  // the first blank line not yet followed by data; 0 for none
  uint64_t end_ = 0;   // where the last data row's line ends
  std::vector<std::string_view> fields_;
  std::vector<float> features_;  // a row's values: parsed to check them, then dropped
};

void check_options(const CsvOptions& o) {
  COHORT_CHECK_ARG(!o.path.empty(), "CsvDataset: no path given");
  COHORT_CHECK_ARG(o.header == "auto" || o.header == "true" || o.header == "false",
                   "CsvDataset: header must be \"auto\", \"true\" or \"false\", got \"", o.header,
                   "\"");
  // A delimiter that can occur inside a number or a quoted field would split it.
  const char c = o.delimiter;
  COHORT_CHECK_ARG(c != '\0' && !std::isalnum(static_cast<unsigned char>(c)) &&
                       std::string_view(".+-\" \r\n").find(c) == std::string_view::npos,
                   "CsvDataset: delimiter '", c, "' cannot separate numbers");
  COHORT_CHECK_ARG(std::isfinite(o.standardize.mean) && std::isfinite(o.standardize.std) &&
                       o.standardize.std > 0,
                   "CsvDataset: standardize needs a finite mean and a std > 0, got mean ",
                   o.standardize.mean, ", std ", o.standardize.std);
}

Shape resolve_shape(const Data& d, const Shape& shape) {
  const int64_t features = d.columns() - 1;
  if (shape.empty()) return {features};
  const bool positive = std::all_of(shape.begin(), shape.end(), [](int64_t n) { return n > 0; });
  COHORT_CHECK_ARG(positive && shape_numel(shape) == features, "CsvDataset: shape ",
                   shape_str(shape), " holds ", positive ? shape_numel(shape) : 0,
                   " values, but each row of ", d.path, " has ", features, " features (",
                   d.columns(), " columns less the label column)");
  return shape;
}

// Reads row i again and parses it into x; returns its label. A row that no longer parses, or
// whose label moved, means the file was rewritten under us: an IoError, not the user's input.
int64_t read_row(const Data& d, int64_t i, std::string& buf, std::vector<std::string_view>& fields,
                 float* x) {
  const uint64_t begin = d.offsets[size_t(i)];
  const Where where{d.path, d.first_data_line + i};
  buf.resize(size_t(d.offsets[size_t(i) + 1] - begin));
  pread_all(d, buf.data(), buf.size(), begin, where);
  int64_t label = 0;
  try {
    label = parse_row(d, strip_eol(buf), where.line, fields, x);
  } catch (const InvalidArgument& e) {
    throw IoError(detail::str(e.what(), " (", d.path, " changed after CsvDataset read it)"));
  }
  COHORT_CHECK_IO(label == d.labels[size_t(i)], where, "label ", label, ", but ",
                  d.labels[size_t(i)], " when CsvDataset read it: ", d.path, " changed");
  return label;
}

}  // namespace

CsvDataset::CsvDataset(const CsvOptions& options) : standardize_(options.standardize) {
  check_options(options);
  auto data = std::make_shared<Data>();
  data->path = options.path;
  data->delimiter = options.delimiter;
  open_file(*data);
  Indexer indexer(*data, options);
  for_each_line(data->fd, data->path,
                [&](int64_t no, uint64_t begin, uint64_t end, std::string_view text) {
                  indexer.line(no, begin, end, text);
                });
  indexer.finish();
  sample_shape_ = resolve_shape(*data, options.shape);
  data_ = std::move(data);
}

int64_t CsvDataset::size() const {
  return data_->rows();
}
const Shape& CsvDataset::sample_shape() const {
  return sample_shape_;
}
int64_t CsvDataset::num_classes() const {
  return data_->num_classes;
}
int64_t CsvDataset::features() const {
  return data_->columns() - 1;
}
const std::string& CsvDataset::path() const {
  return data_->path;
}
const std::vector<std::string>& CsvDataset::column_names() const {
  return data_->column_names;
}

Batch CsvDataset::get_batch(std::span<const int64_t> indices) const {
  const Data& d = *data_;
  check_batch_indices(indices, d.rows(), "CsvDataset " + d.path);
  const int64_t b = int64_t(indices.size());
  const int64_t f = d.columns() - 1;
  Shape xs{b};
  xs.insert(xs.end(), sample_shape_.begin(), sample_shape_.end());
  Batch out{empty(xs, DType::f32), empty({b}, DType::i64)};
  float* x = out.x.data<float>();
  int64_t* y = out.y.data<int64_t>();
  std::string buf;  // per call: get_batch runs on several threads at once
  std::vector<std::string_view> fields;
  const float mean = standardize_.mean, sd = standardize_.std;
  for (int64_t k = 0; k < b; ++k) {
    float* row = x + k * f;
    y[k] = read_row(d, indices[size_t(k)], buf, fields, row);
    for (int64_t j = 0; j < f; ++j) row[j] = (row[j] - mean) / sd;
  }
  return out;
}

}  // namespace cohort::data
