#include "cohort/data/numpy.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string_view>
#include <vector>

#include "cohort/core/error.h"
#include "cohort/data/mapped_reads.h"
#include "cohort/data/npy_array.h"
#include "cohort/data/npz.h"

namespace cohort::data {

// Arrays are read in place, as the (little-endian) files store them.
static_assert(std::endian::native == std::endian::little,
              ".npy data is read in place; a big-endian host would need byte swaps");

namespace {

namespace fs = std::filesystem;

// Which array of the pair is being read: decides the dtypes and ranks it may have.
struct Role {
  const char* what;  // "inputs", "labels"
  bool labels;
};
constexpr Role kInputs{"inputs", false};
constexpr Role kLabels{"labels", true};

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

struct HeaderValue {
  enum class Kind { kString, kBool, kTuple };
  Kind kind = Kind::kString;
  std::string text;
  bool flag = false;
  Shape dims;
};
using Header = std::map<std::string, HeaderValue>;

// The header is the repr() of a Python dict of str keys to str, bool and int-tuple values,
// padded with spaces and a newline: {'descr': '<f4', 'fortran_order': False, 'shape': (3,), }.
// Other writers differ in spacing, quotes and trailing commas, so this parses tokens, not text.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  Header parse() {
    Header h;
    expect('{');
    while (!eat('}')) {
      std::string key = string();
      expect(':');
      h[key] = value(key);
      if (!eat(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != s_.size()) fail("only spaces after the closing '}'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& expected) const {
    std::string shown(s_.substr(0, 200));
    shown.erase(shown.find_last_not_of(" \n") + 1);
    throw InvalidArgument(detail::str(where_, ": cannot parse the .npy header at character ", pos_,
                                      ": expected ", expected, "; header: ", shown,
                                      s_.size() > 200 ? "..." : ""));
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ >= s_.size() || s_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("'") + c + "'");
  }
  bool word(std::string_view w) {
    skip_space();
    if (!s_.substr(pos_).starts_with(w)) return false;
    pos_ += w.size();
    return true;
  }
  std::string string() {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) fail("a quoted string");
    const char quote = s_[pos_++];
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;  // an escape: keep the next char
      out += s_[pos_++];
    }
    if (pos_ >= s_.size()) fail("the closing quote of a string");
    ++pos_;
    return out;
  }
  int64_t integer() {
    skip_space();
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      const int digit = s_[pos_++] - '0';
      if (v > (INT64_MAX - digit) / 10) fail("a dimension that fits in int64");
      v = v * 10 + digit;
    }
    if (pos_ == start) fail("a non-negative integer");
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 wrote longs as 3L
    return v;
  }
  HeaderValue value(const std::string& key) {
    HeaderValue v;
    skip_space();
    if (pos_ < s_.size() && (s_[pos_] == '\'' || s_[pos_] == '"')) {
      v.text = string();
    } else if (word("True")) {
      v.kind = HeaderValue::Kind::kBool;
      v.flag = true;
    } else if (word("False")) {
      v.kind = HeaderValue::Kind::kBool;
    } else if (eat('(')) {
      v.kind = HeaderValue::Kind::kTuple;
      while (!eat(')')) {
        v.dims.push_back(integer());
        if (!eat(',')) {
          expect(')');
          break;
        }
      }
    } else {
      COHORT_CHECK_ARG(key != "descr" || pos_ >= s_.size() || s_[pos_] != '[', where_,
                       ": has a structured dtype (a list of fields); expected a plain numeric "
                       "array");
      fail("a string, True, False or a tuple of integers for '" + key + "'");
    }
    return v;
  }

  std::string_view s_;
  size_t pos_ = 0;
  const std::string& where_;
};

// The element type of a descr like '<f4' (kOther if unknown). Byte order and Python objects are
// refused here, for either role; whether the type suits the role is checked by check_role.
npy_detail::Elem parse_descr(const std::string& d, const std::string& where, int64_t& itemsize) {
  COHORT_CHECK_ARG(d.size() >= 2 && std::string_view("<>|=").find(d[0]) != std::string_view::npos,
                   where, ": dtype '", d, "' is not a simple type like '<f4'");
  COHORT_CHECK_ARG(d[1] != 'O', where, ": dtype '", d,
                   "' holds Python objects (pickled); expected a numeric array");
  // One byte has no byte order: numpy writes '|u1', but '>u1' is the same array.
  COHORT_CHECK_ARG(d[0] != '>' || d.substr(2) == "1", where, ": dtype '", d,
                   "' is big-endian; only little-endian arrays are read (save a.astype('<",
                   d.substr(1), "'))");
  struct Known {
    std::string_view code;
    npy_detail::Elem elem;
    int64_t size;
  };
  static constexpr Known kKnown[] = {
      {"f4", npy_detail::Elem::kF32, 4}, {"f8", npy_detail::Elem::kF64, 8},
      {"u1", npy_detail::Elem::kU8, 1},  {"i8", npy_detail::Elem::kI64, 8},
      {"i4", npy_detail::Elem::kI32, 4}, {"b1", npy_detail::Elem::kBool, 1}};
  for (const Known& k : kKnown) {
    if (d.substr(1) == k.code) {
      itemsize = k.size;
      return k.elem;
    }
  }
  return npy_detail::Elem::kOther;
}

void check_role(const npy_detail::NpyArray& a, Role role) {
  static constexpr npy_detail::Elem kInputTypes[] = {npy_detail::Elem::kF32, npy_detail::Elem::kF64,
                                                     npy_detail::Elem::kU8, npy_detail::Elem::kI64,
                                                     npy_detail::Elem::kI32};
  static constexpr npy_detail::Elem kLabelTypes[] = {npy_detail::Elem::kI64, npy_detail::Elem::kI32,
                                                     npy_detail::Elem::kU8,
                                                     npy_detail::Elem::kBool};
  const std::span<const npy_detail::Elem> ok = role.labels
                                                   ? std::span<const npy_detail::Elem>(kLabelTypes)
                                                   : std::span<const npy_detail::Elem>(kInputTypes);
  COHORT_CHECK_ARG(std::find(ok.begin(), ok.end(), a.elem) != ok.end(), a.where, ": ", role.what,
                   " have dtype '", a.descr, "'; expected ",
                   role.labels ? "int64 '<i8', int32 '<i4', uint8 '|u1' or bool '|b1' (class "
                                 "indices; convert with y.astype(np.int64))"
                               : "float32 '<f4', float64 '<f8', uint8 '|u1', int64 '<i8' or "
                                 "int32 '<i4'");
  const char* expected = role.labels ? "labels [N]" : "inputs [N, ...]";
  COHORT_CHECK_ARG(!a.shape.empty(), a.where, ": is a 0-d array (a scalar, shape ()); expected ",
                   expected);
  COHORT_CHECK_ARG(!role.labels || a.shape.size() == 1, a.where, ": labels have shape ",
                   shape_str(a.shape), "; expected labels [N] (flatten with y.reshape(-1))");
  COHORT_CHECK_ARG(role.labels || a.shape.size() >= 2, a.where, ": inputs have shape ",
                   shape_str(a.shape),
                   "; expected inputs [N, ...] (for one feature per sample, x.reshape(-1, 1))");
}

// The data after the header must be exactly what the shape and dtype promise.
void check_size(const npy_detail::NpyArray& a, uint64_t available) {
  int64_t bytes = a.itemsize;
  for (int64_t d : a.shape) {
    COHORT_CHECK_ARG(!__builtin_mul_overflow(bytes, d, &bytes), a.where, ": shape ",
                     shape_str(a.shape), " of '", a.descr, "' overflows int64 bytes");
  }
  COHORT_CHECK_IO(available >= uint64_t(bytes), a.where, ": holds ", available,
                  " bytes of data, but shape ", shape_str(a.shape), " of '", a.descr, "' needs ",
                  bytes, "; truncated?");
  COHORT_CHECK_ARG(available == uint64_t(bytes), a.where, ": holds ", available,
                   " bytes of data, more than the ", bytes, " that shape ", shape_str(a.shape),
                   " of '", a.descr, "' needs");
}

bool has_npy_magic(std::span<const uint8_t> b) {
  return b.size() >= 6 && std::memcmp(b.data(), "\x93NUMPY", 6) == 0;
}

// The first bytes as text, non-printing ones as \xNN: what the file is instead of an array.
std::string printable(std::span<const uint8_t> b) {
  std::string s;
  for (uint8_t c : b.first(std::min<size_t>(b.size(), 8))) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    s += std::isprint(c) ? std::string(1, char(c)) : buf;
  }
  return s;
}

const HeaderValue& field(const Header& h, const char* key, HeaderValue::Kind kind, const char* what,
                         const std::string& where) {
  auto it = h.find(key);
  COHORT_CHECK_ARG(it != h.end() && it->second.kind == kind, where, ": the .npy header has no '",
                   key, "' ", what);
  return it->second;
}

// Magic "\x93NUMPY", version byte pair, header length (uint16 in 1.0, uint32 in 2.0 and 3.0),
// the header, then the data.
npy_detail::NpyArray read_npy(OwnedBytes in, const std::string& where, Role role) {
  const std::span<const uint8_t> b = in.bytes;
  COHORT_CHECK_ARG(has_npy_magic(b), where, ": not a .npy array: starts with \"", printable(b),
                   "\", expected the magic \"\\x93NUMPY\"");
  COHORT_CHECK_IO(b.size() >= 10, where, ": ", b.size(), " bytes, too short for a .npy header");
  const int major = b[6], minor = b[7];
  COHORT_CHECK_ARG(major >= 1 && major <= 3 && minor == 0, where, ": .npy format version ", major,
                   ".", minor, " is not supported (expected 1.0, 2.0 or 3.0)");
  const uint64_t start = major == 1 ? 10 : 12;
  COHORT_CHECK_IO(b.size() >= start, where, ": ", b.size(), " bytes, too short for a .npy header");
  const uint64_t header_len = major == 1 ? load<uint16_t>(&b[8]) : load<uint32_t>(&b[8]);
  COHORT_CHECK_IO(header_len <= b.size() - start, where, ": the .npy header declares ", header_len,
                  " bytes but only ", b.size() - start, " follow; truncated?");
  const std::string_view text(reinterpret_cast<const char*>(b.data() + start), header_len);
  const Header h = HeaderParser(text, where).parse();
  using Kind = HeaderValue::Kind;
  npy_detail::NpyArray a;
  a.where = where;
  a.descr = field(h, "descr", Kind::kString, "(a dtype string like '<f4')", where).text;
  a.elem = parse_descr(a.descr, where, a.itemsize);
  COHORT_CHECK_ARG(!field(h, "fortran_order", Kind::kBool, "(True or False)", where).flag, where,
                   ": fortran_order is True; expected a C-order array (save "
                   "np.ascontiguousarray(a))");
  a.shape = field(h, "shape", Kind::kTuple, "(a tuple of ints)", where).dims;
  check_role(a, role);
  check_size(a, b.size() - start - header_len);
  a.data = b.data() + start + header_len;
  a.owner = std::move(in.owner);
  return a;
}

std::string npy_files_in(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".npy") names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "no .npy files" : s;
}

npy_detail::NpyArray load_from_dir(const std::string& dir, const std::string& key, Role role,
                                   MappedReads& reads) {
  const fs::path file = fs::path(dir) / (key + ".npy");
  std::error_code ec;
  COHORT_CHECK_IO(fs::is_regular_file(file, ec), file.string(), " does not exist; ", dir, " holds ",
                  npy_files_in(dir));
  auto map = std::make_shared<const MappedFile>(file.string());
  reads.add(map);
  return read_npy({map->bytes(), map}, file.string(), role);
}

// As np.load does: a member named exactly `key`, else `key`.npy.
const ZipMember* find_member(const std::vector<ZipMember>& members, const std::string& key) {
  for (const std::string& name : {key, key + ".npy"}) {
    for (const ZipMember& m : members) {
      if (m.name == name) return &m;
    }
  }
  return nullptr;
}

npy_detail::NpyArray load_member(const std::shared_ptr<const MappedFile>& zip,
                                 const std::vector<ZipMember>& members, const std::string& key,
                                 Role role) {
  const ZipMember* m = find_member(members, key);
  if (m == nullptr) {
    std::string names;  // as np.load lists them: without ".npy"
    for (const ZipMember& e : members) {
      std::string_view n = e.name;
      if (n.ends_with(".npy")) n.remove_suffix(4);
      names += detail::str(names.empty() ? "" : ", ", "'", n, "'");
    }
    throw InvalidArgument(detail::str(zip->path(), " has no array '", key, "' (no member ", key,
                                      ".npy); it holds ", names.empty() ? "nothing" : names));
  }
  return read_npy(zip_member_data(zip, *m), zip->path() + ":" + m->name, role);
}

int64_t label_at(const npy_detail::NpyArray& y, int64_t i, const MappedReads& reads) {
  const uint8_t* p = y.data + i * y.itemsize;
  reads.charge(p, uint64_t(y.itemsize));
  switch (y.elem) {
    case npy_detail::Elem::kI64:
      return load<int64_t>(p);
    case npy_detail::Elem::kI32:
      return load<int32_t>(p);
    case npy_detail::Elem::kBool:
      return *p != 0;
    default:
      return *p;  // uint8: the one other type check_role lets labels have
  }
}

}  // namespace

struct NumpyDataset::Data {
  std::string path;
  npy_detail::NpyArray x, y;
  Shape sample_shape;
  int64_t n = 0;
  int64_t sample_len = 0;  // elements per sample
  int64_t num_classes = 0;
  MappedReads reads;  // every row read from a mapping is charged here (mapped_reads.h)
};

namespace {

void validate(NumpyDataset::Data& d) {
  const npy_detail::NpyArray &x = d.x, &y = d.y;
  COHORT_CHECK_ARG(x.shape[0] == y.shape[0], "NumPy data set ", d.path, ": inputs ", x.where,
                   " have shape ", shape_str(x.shape), " but labels ", y.where, " have shape ",
                   shape_str(y.shape), "; their first dimensions (the samples) must match");
  d.n = x.shape[0];
  d.sample_shape.assign(x.shape.begin() + 1, x.shape.end());
  d.sample_len = shape_numel(d.sample_shape);
  COHORT_CHECK_ARG(d.n > 0 && d.sample_len > 0, x.where, ": inputs of shape ", shape_str(x.shape),
                   " hold no values; a data set needs at least one non-empty sample");
  int64_t max_label = -1;
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t v = label_at(y, i, d.reads);
    COHORT_CHECK_ARG(v >= 0, y.where, ": label ", i, " is ", v,
                     "; labels must be class indices >= 0");
    max_label = std::max(max_label, v);
  }
  d.num_classes = max_label + 1;
}

std::shared_ptr<const NumpyDataset::Data> load(const NumpyOptions& o) {
  COHORT_CHECK_ARG(!o.path.empty(), "NumPy data set: no path given");
  COHORT_CHECK_ARG(!o.x_key.empty() && !o.y_key.empty(), "NumPy data set ", o.path,
                   ": x_key and y_key must not be empty");
  std::error_code ec;
  const fs::file_status st = fs::status(o.path, ec);
  COHORT_CHECK_IO(fs::exists(st), "NumPy data set ", o.path, " does not exist; expected a .npz ",
                  "holding '", o.x_key, "' and '", o.y_key, "' or a directory holding ", o.x_key,
                  ".npy and ", o.y_key, ".npy");
  auto d = std::make_shared<NumpyDataset::Data>();
  d->path = o.path;
  if (fs::is_directory(st)) {
    d->x = load_from_dir(o.path, o.x_key, kInputs, d->reads);
    d->y = load_from_dir(o.path, o.y_key, kLabels, d->reads);
  } else {
    auto zip = std::make_shared<const MappedFile>(o.path);
    COHORT_CHECK_ARG(!has_npy_magic(zip->bytes()), o.path,
                     " is a single .npy array; a data set needs inputs and labels: a .npz "
                     "(np.savez(path, x=x, y=y)) or a directory holding x.npy and y.npy");
    const std::vector<ZipMember> members = zip_members(*zip);
    d->reads.add(zip);
    d->x = load_member(zip, members, o.x_key, kInputs);
    d->y = load_member(zip, members, o.y_key, kLabels);
  }
  validate(*d);
  d->reads.release();  // training starts with none of the labels validate read resident
  return d;
}

// dst[b, :] = float(row indices[b] of src) * scale + bias for rows of `len` elements of type T:
// the conversion happens here, per batch, so no converted copy of the data set exists.
template <typename T>
void gather_rows(const uint8_t* src, int64_t len, std::span<const int64_t> indices, float scale,
                 float bias, const MappedReads& reads, float* __restrict dst) {
  const int64_t row_bytes = len * int64_t(sizeof(T));
  for (int64_t idx : indices) {
    const uint8_t* row = src + idx * row_bytes;
    reads.charge(row, uint64_t(row_bytes));
    for (int64_t j = 0; j < len; ++j) dst[j] = float(load<T>(row + j * sizeof(T))) * scale + bias;
    dst += len;
  }
}

}  // namespace

NumpyDataset::NumpyDataset(const NumpyOptions& options) {
  const Standardize& s = options.standardize;
  COHORT_CHECK_ARG(
      std::isfinite(s.mean) && std::isfinite(s.std) && s.std > 0, "NumPy data set ", options.path,
      ": standardize needs a finite mean and a finite std > 0, got mean ", s.mean, ", std ", s.std);
  data_ = load(options);
  scale_ = 1.0f / s.std;
  bias_ = -s.mean / s.std;
}

int64_t NumpyDataset::size() const {
  return data_->n;
}
const Shape& NumpyDataset::sample_shape() const {
  return data_->sample_shape;
}
int64_t NumpyDataset::num_classes() const {
  return data_->num_classes;
}
const std::string& NumpyDataset::path() const {
  return data_->path;
}

Batch NumpyDataset::get_batch(std::span<const int64_t> indices) const {
  const Data& d = *data_;
  check_batch_indices(indices, d.n, "NumpyDataset");
  const int64_t b = int64_t(indices.size());
  Shape xs{b};
  xs.insert(xs.end(), d.sample_shape.begin(), d.sample_shape.end());
  Batch out{empty(xs, DType::f32), empty({b}, DType::i64)};
  float* x = out.x.data<float>();
  const uint8_t* src = d.x.data;
  switch (d.x.elem) {
    case npy_detail::Elem::kF32:
      gather_rows<float>(src, d.sample_len, indices, scale_, bias_, d.reads, x);
      break;
    case npy_detail::Elem::kF64:
      gather_rows<double>(src, d.sample_len, indices, scale_, bias_, d.reads, x);
      break;
    case npy_detail::Elem::kU8:
      gather_rows<uint8_t>(src, d.sample_len, indices, scale_, bias_, d.reads, x);
      break;
    case npy_detail::Elem::kI64:
      gather_rows<int64_t>(src, d.sample_len, indices, scale_, bias_, d.reads, x);
      break;
    case npy_detail::Elem::kI32:
      gather_rows<int32_t>(src, d.sample_len, indices, scale_, bias_, d.reads, x);
      break;
    default:
      COHORT_INTERNAL(false, "NumpyDataset: inputs of an unchecked dtype");
  }
  int64_t* y = out.y.data<int64_t>();
  for (int64_t k = 0; k < b; ++k) y[k] = label_at(d.y, indices[size_t(k)], d.reads);
  return out;
}

bool npz_has(const std::string& path, const std::string& key) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  COHORT_CHECK_IO(fs::exists(st), "npz_has: ", path, " does not exist");
  if (fs::is_directory(st)) return fs::is_regular_file(fs::path(path) / (key + ".npy"), ec);
  const MappedFile zip(path);
  const std::vector<ZipMember> members = zip_members(zip);
  return find_member(members, key) != nullptr;
}

}  // namespace cohort::data
