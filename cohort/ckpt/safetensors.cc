#include "cohort/ckpt/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "cohort/ckpt/file_io.h"
#include "cohort/ckpt/manifest.h"
#include "cohort/core/bytes.h"

namespace cohort::ckpt {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

// The reference implementation refuses headers above 100 MB; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                             DType::i32, DType::i64, DType::u8};

bool parse_dtype(const std::string& s, DType* out) {
  for (DType d : kDTypes) {
    if (s == safetensors_dtype(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

void check_names(const std::string& path, const NamedTensors& tensors) {
  std::set<std::string> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    COHORT_CHECK_ARG(!name.empty(), "write_safetensors ", path, ": tensor #", i,
                     " has an empty name");
    COHORT_CHECK_ARG(name != "__metadata__", "write_safetensors ", path, ": tensor #", i,
                     " is named '__metadata__', which the format reserves for metadata");
    COHORT_CHECK_ARG(seen.insert(name).second, "write_safetensors ", path,
                     ": duplicate tensor name '", name, "'");
    COHORT_CHECK_ARG(t.defined(), "write_safetensors ", path, ": tensor '", name, "' is undefined");
    COHORT_CHECK_ARG(t.device().is_cpu(), "write_safetensors ", path, ": tensor '", name,
                     "' is on ", t.device().str(), ", expected a CPU tensor");
  }
}

// The JSON header, padded with spaces to a multiple of 8 bytes.
std::string build_header(const std::string& path, const NamedTensors& tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const uint64_t n = t.nbytes();
    h[name] = nlohmann::ordered_json{{"dtype", safetensors_dtype(t.dtype())},
                                     {"shape", t.shape()},
                                     {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string s;
  try {
    s = h.dump();
  } catch (const nlohmann::json::exception& e) {  // names or metadata that are not UTF-8
    throw InvalidArgument(
        detail::str("write_safetensors ", path, ": cannot encode the header: ", e.what()));
  }
  s.append((8 - s.size() % 8) % 8, ' ');
  return s;
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

std::string offsets_str(const Entry& e) {
  return detail::str("[", e.begin, ", ", e.end, "]");
}

// A JSON value for an error message, without dump()ing containers: dump() recurses once per
// nesting level, so a header of 100k '[' would overflow the stack while reporting it.
std::string brief(const nlohmann::json& v) {
  if (v.is_structured()) return detail::str("an ", v.type_name(), " of ", v.size(), " entries");
  std::string s = v.dump();
  return s.size() <= 64 ? s : s.substr(0, 61) + "...";
}

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& v,
                  uint64_t data_size) {
  const std::string where = path + ": tensor '" + name + "'";
  COHORT_CHECK_IO(v.is_object(), where, ": expected an object with dtype, shape, data_offsets");
  COHORT_CHECK_IO(v.contains("dtype") && v["dtype"].is_string(), where,
                  ": missing or non-string \"dtype\"");
  Entry e;
  e.name = name;
  const std::string ds = v["dtype"].get<std::string>();
  COHORT_CHECK_IO(parse_dtype(ds, &e.dtype), where, ": unknown dtype '", ds,
                  "' (expected one of F32 F64 F16 BF16 I32 I64 U8)");
  COHORT_CHECK_IO(v.contains("shape"), where, ": missing \"shape\"");
  uint64_t numel = 0;
  e.shape = internal::parse_shape(where, v["shape"], &numel);
  const auto& off = v.contains("data_offsets") ? v["data_offsets"] : nlohmann::json();
  COHORT_CHECK_IO(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                      off[1].is_number_unsigned(),
                  where, ": \"data_offsets\" must be [begin, end] with non-negative integers");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  COHORT_CHECK_IO(e.begin <= e.end && e.end <= data_size, where, ": data_offsets ", offsets_str(e),
                  " out of range: the data section holds ", data_size, " bytes");
  uint64_t want = 0;
  COHORT_CHECK_IO(!__builtin_mul_overflow(numel, uint64_t(dtype_size(e.dtype)), &want) &&
                      want == e.end - e.begin,
                  where, " (", ds, " ", shape_str(e.shape), ") needs ", want,
                  " bytes but data_offsets ", offsets_str(e), " hold ", e.end - e.begin);
  return e;
}

void parse_metadata(const std::string& path, const nlohmann::json& v,
                    std::map<std::string, std::string>* out) {
  COHORT_CHECK_IO(v.is_object(), path, ": \"__metadata__\" must be an object of strings");
  for (const auto& [k, s] : v.items()) {
    COHORT_CHECK_IO(s.is_string(), path, ": __metadata__ value for '", k, "' is ", brief(s),
                    ", expected a string");
    if (out) (*out)[k] = s.get<std::string>();
  }
}

// Sorted by offset, the entries must tile [0, data_size) exactly: no overlap, no hole.
void check_tiling(const std::string& path, std::vector<Entry>& entries, uint64_t data_size) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    COHORT_CHECK_IO(e.begin >= expected, path, ": tensor '", e.name, "' data_offsets ",
                    offsets_str(e), " overlap tensor '", prev ? prev->name : "", "' ",
                    prev ? offsets_str(*prev) : "");
    COHORT_CHECK_IO(e.begin == expected, path, ": bytes [", expected, ", ", e.begin,
                    ") of the data belong to no tensor (hole before tensor '", e.name, "')");
    if (e.end > e.begin) prev = &e;
    expected = e.end;
  }
  COHORT_CHECK_IO(expected == data_size, path, ": the data section holds ", data_size,
                  " bytes but the tensors cover only ", expected);
}

using ReadAt = std::function<void(void* dst, size_t n, uint64_t offset, const char* what)>;

// The one reader behind read_safetensors (a file) and parse_safetensors (bytes): `size` bytes
// in all, fetched through `read_at`, each range checked against `size` before it is asked for.
// `where` names the source in every error.
NamedTensors read_safetensors_from(const std::string& where, uint64_t size, const ReadAt& read_at,
                                   std::map<std::string, std::string>* metadata) {
  COHORT_CHECK_IO(size >= 8, where, ": file is ", size,
                  " bytes, too short for a safetensors file (expected an 8-byte header length)");
  uint8_t len[8];
  read_at(len, 8, 0, "the header length");
  const uint64_t n = bytes::load<uint64_t>(len);
  COHORT_CHECK_IO(n <= size - 8, where, ": header length ", n, " goes beyond the end of the file (",
                  size, " bytes); truncated or not safetensors");
  COHORT_CHECK_IO(n <= kMaxHeaderBytes, where, ": header length ", n, " exceeds the ",
                  kMaxHeaderBytes, "-byte limit");
  std::string text(n, '\0');
  read_at(text.data(), n, 8, "the JSON header");
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(detail::str(where, ": header is not valid JSON: ", e.what()));
  }
  COHORT_CHECK_IO(h.is_object(), where, ": header is JSON but not an object");
  const uint64_t data_size = size - 8 - n;
  if (metadata) metadata->clear();
  std::vector<Entry> entries;
  for (const auto& [key, v] : h.items()) {
    if (key == "__metadata__")
      parse_metadata(where, v, metadata);
    else
      entries.push_back(parse_entry(where, key, v, data_size));
  }
  check_tiling(where, entries, data_size);
  NamedTensors out;
  out.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    const std::string what = "tensor '" + e.name + "'";
    if (t.nbytes() > 0) read_at(t.raw_data(), t.nbytes(), 8 + n + e.begin, what.c_str());
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace

// Even an empty tensor (a 0 among the dims) must have dims whose non-zero product fits in
// int64: its strides are that product ([0, 2^62, 4] overflowed them; UBSan in the fuzz target).
Shape internal::parse_shape(const std::string& where, const nlohmann::json& v, uint64_t* numel) {
  COHORT_CHECK_IO(v.is_array(), where, ": \"shape\" must be an array of non-negative integers");
  Shape shape;
  uint64_t nonzero = 1;
  bool empty = false;
  for (const auto& d : v) {
    // Parsed text gives unsigned numbers; an index built in memory holds int64 ones.
    COHORT_CHECK_IO(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0),
                    where, ": \"shape\" entry ", brief(d), " is not a non-negative integer");
    const uint64_t x = d.get<uint64_t>();
    empty = empty || x == 0;
    COHORT_CHECK_IO(
        x == 0 || (!__builtin_mul_overflow(nonzero, x, &nonzero) && nonzero <= uint64_t(INT64_MAX)),
        where, ": shape ", shape_str(shape), " then ", x,
        ": the product of its dims exceeds 2^63 - 1");
    shape.push_back(int64_t(x));
  }
  *numel = empty ? 0 : nonzero;
  return shape;
}

const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::u8:
      return "U8";
  }
  return "?";
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  check_names(path, tensors);
  const std::string header = build_header(path, tensors, metadata);
  uint8_t len[8];
  bytes::store(len, uint64_t(header.size()));
  internal::File f = internal::File::create(path);
  f.write_all(len, 8);
  f.write_all(header.data(), header.size());
  for (const auto& [name, t] : tensors) {
    if (t.numel() == 0) continue;
    const Tensor c = t.is_contiguous() && t.device().is_cpu() ? t : internal::contiguous_copy(t);
    f.write_all(c.raw_data(), c.nbytes());
  }
  f.close();
}

std::vector<uint8_t> encode_safetensors(const NamedTensors& tensors, const std::string& name,
                                        const std::map<std::string, std::string>& metadata) {
  check_names(name, tensors);
  const std::string header = build_header(name, tensors, metadata);
  std::vector<uint8_t> out(8);
  bytes::store(out.data(), uint64_t(header.size()));
  out.insert(out.end(), header.begin(), header.end());
  for (const auto& [tensor_name, t] : tensors) {
    if (t.numel() == 0) continue;
    const Tensor c = t.is_contiguous() && t.device().is_cpu() ? t : internal::contiguous_copy(t);
    const auto* b = static_cast<const uint8_t*>(c.raw_data());
    out.insert(out.end(), b, b + c.nbytes());
  }
  return out;
}

NamedTensors read_safetensors(const std::string& path,
                              std::map<std::string, std::string>* metadata) {
  internal::File f = internal::File::open_read(path);
  auto read_at = [&f](void* dst, size_t n, uint64_t offset, const char* what) {
    f.pread_all(dst, n, offset, what);
  };
  return read_safetensors_from(path, f.size(), read_at, metadata);
}

NamedTensors parse_safetensors(std::span<const uint8_t> bytes, const std::string& name,
                               std::map<std::string, std::string>* metadata) {
  // read_safetensors_from only asks for ranges inside `size`; the check keeps that a promise
  // this function does not depend on.
  auto read_at = [bytes, &name](void* dst, size_t n, uint64_t offset, const char* what) {
    COHORT_INTERNAL(offset <= bytes.size() && n <= bytes.size() - offset, name, ": reading ", what,
                    " [", offset, ", +", n, ") past the end (", bytes.size(), " bytes)");
    if (n > 0) std::memcpy(dst, bytes.data() + offset, n);
  };
  return read_safetensors_from(name, bytes.size(), read_at, metadata);
}

}  // namespace cohort::ckpt
