// NumpyDataset (cohort/data/numpy.h): .npy files and .npz archives are written byte by byte
// here, so that each test controls the header or zip record it is about; one test reads
// archives that numpy itself wrote.
#include "cohort/data/numpy.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "tests/support/files.h"
#include "tests/unit/data_test_util.h"

namespace cohort::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::string;

void put(Bytes& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out += char((v >> (8 * i)) & 0xff);
}

// Magic, version, header length, the header padded with spaces and a newline so that the data
// starts at a multiple of 64 (as numpy does), then the data.
Bytes npy_with_header(const std::string& dict, const Bytes& data, int major = 1) {
  const size_t preamble = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes out = "\x93NUMPY";
  out += char(major);
  out += char(0);
  put(out, header.size(), major == 1 ? 2 : 4);
  return out + header + data;
}

std::string tuple(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// values as a .npy of C type T with the given descr and shape.
template <typename T>
Bytes npy(const std::string& descr, const Shape& shape, std::initializer_list<double> values,
          const std::string& fortran = "False") {
  Bytes data;
  for (double v : values) {
    T t = T(v);
    data.append(reinterpret_cast<const char*>(&t), sizeof t);
  }
  return npy_with_header("{'descr': '" + descr + "', 'fortran_order': " + fortran +
                             ", 'shape': " + tuple(shape) + ", }",
                         data);
}

Bytes deflate_raw(const Bytes& in) {
  z_stream s{};
  EXPECT_EQ(deflateInit2(&s, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&s, uLong(in.size())), '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  s.avail_in = uInt(in.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

struct Member {
  std::string name;
  Bytes data;
  bool deflate = false;
  uint32_t crc_xor = 0;  // != 0: a corrupt CRC in the directory
};

// A zip archive: local headers and data, the central directory, the end record. zip64 saturates
// the directory's sizes and offsets and adds the zip64 extra field and end records, as a writer
// does for members past 4 GiB.
Bytes zip(const std::vector<Member>& members, bool zip64 = false) {
  Bytes out, central;
  for (const Member& m : members) {
    const Bytes body = m.deflate ? deflate_raw(m.data) : m.data;
    const uint32_t crc =
        uint32_t(crc32(0, reinterpret_cast<const Bytef*>(m.data.data()), uInt(m.data.size())));
    const uint64_t offset = out.size();
    put(out, 0x04034b50, 4);
    put(out, 20, 2);
    put(out, 0, 2);
    put(out, m.deflate ? 8 : 0, 2);
    put(out, 0, 4);  // time, date
    put(out, crc, 4);
    put(out, body.size(), 4);
    put(out, m.data.size(), 4);
    put(out, m.name.size(), 2);
    put(out, 0, 2);
    out += m.name + body;
    Bytes extra;
    if (zip64) {
      put(extra, 1, 2);
      put(extra, 24, 2);
      put(extra, m.data.size(), 8);
      put(extra, body.size(), 8);
      put(extra, offset, 8);
    }
    const uint64_t sat = 0xffffffff;
    put(central, 0x02014b50, 4);
    put(central, 45, 2);
    put(central, 45, 2);
    put(central, 0, 2);
    put(central, m.deflate ? 8 : 0, 2);
    put(central, 0, 4);
    put(central, crc ^ m.crc_xor, 4);
    put(central, zip64 ? sat : body.size(), 4);
    put(central, zip64 ? sat : m.data.size(), 4);
    put(central, m.name.size(), 2);
    put(central, extra.size(), 2);
    put(central, 0, 6);  // comment length, disk, internal attributes
    put(central, 0, 4);  // external attributes
    put(central, zip64 ? sat : offset, 4);
    central += m.name + extra;
  }
  const uint64_t cd_offset = out.size(), n = members.size();
  out += central;
  if (zip64) {
    const uint64_t record = out.size();
    put(out, 0x06064b50, 4);
    put(out, 44, 8);
    put(out, 45, 2);
    put(out, 45, 2);
    put(out, 0, 8);  // this disk, the directory's disk
    put(out, n, 8);
    put(out, n, 8);
    put(out, central.size(), 8);
    put(out, cd_offset, 8);
    put(out, 0x07064b50, 4);
    put(out, 0, 4);
    put(out, record, 8);
    put(out, 1, 4);
  }
  put(out, 0x06054b50, 4);
  put(out, 0, 4);
  put(out, zip64 ? 0xffff : n, 2);
  put(out, zip64 ? 0xffff : n, 2);
  put(out, zip64 ? 0xffffffff : central.size(), 4);
  put(out, zip64 ? 0xffffffff : cd_offset, 4);
  put(out, 0, 2);
  return out;
}

const Bytes kX = npy<float>("<f4", {3, 2}, {0, 1, 2, 3, 4, 5});
const Bytes kY = npy<int64_t>("<i8", {3}, {0, 2, 1});

class NumpyData : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const Bytes& bytes) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  // data.npz holding x and y (stored, as np.savez writes them).
  std::string npz(const Bytes& x, const Bytes& y) {
    return write("data.npz", zip({{"x.npy", x}, {"y.npy", y}}));
  }
  static NumpyDataset open(const std::string& path, Standardize s = {}) {
    return NumpyDataset({.path = path, .standardize = s});
  }
  // The InvalidArgument that opening an archive of x and y gives names every one of `words`.
  void expect_refused(const Bytes& x, const Bytes& y, std::initializer_list<std::string> words) {
    const std::string path = npz(x, y);
    expect_error<InvalidArgument>([&] { open(path); }, words);
  }
  testing::TempDir tmp_;
  const fs::path dir_{tmp_.path()};
};

std::vector<float> xs(const NumpyDataset& d, std::vector<int64_t> idx) {
  return d.get_batch(idx).x.to_vector<float>();
}
std::vector<int64_t> ys(const NumpyDataset& d, std::vector<int64_t> idx) {
  return d.get_batch(idx).y.to_vector<int64_t>();
}

TEST_F(NumpyData, InputDtypesConvertToFloat32) {
  const std::initializer_list<double> v = {0, 1, 2, 3, 250, 7};
  const std::pair<const char*, Bytes> cases[] = {{"<f4", npy<float>("<f4", {3, 2}, v)},
                                                 {"<f8", npy<double>("<f8", {3, 2}, v)},
                                                 {"|u1", npy<uint8_t>("|u1", {3, 2}, v)},
                                                 {"<i8", npy<int64_t>("<i8", {3, 2}, v)},
                                                 {"<i4", npy<int32_t>("<i4", {3, 2}, v)}};
  for (const auto& [descr, x] : cases) {
    NumpyDataset d = open(npz(x, kY));
    Batch b = d.get_batch(std::vector<int64_t>{2, 0});
    EXPECT_EQ(b.x.dtype(), DType::f32) << descr;
    EXPECT_EQ(b.x.shape(), (Shape{2, 2})) << descr;
    EXPECT_EQ(b.x.to_vector<float>(), (std::vector<float>{250, 7, 0, 1})) << descr;
    EXPECT_EQ(b.y.to_vector<int64_t>(), (std::vector<int64_t>{1, 0})) << descr;
    EXPECT_EQ(d.size(), 3);
    EXPECT_EQ(d.sample_shape(), Shape{2});
  }
}

TEST_F(NumpyData, LabelDtypesConvertToInt64) {
  const std::pair<const char*, Bytes> cases[] = {{"<i8", npy<int64_t>("<i8", {3}, {4, 0, 9})},
                                                 {"<i4", npy<int32_t>("<i4", {3}, {4, 0, 9})},
                                                 {"|u1", npy<uint8_t>("|u1", {3}, {4, 0, 9})}};
  for (const auto& [descr, y] : cases) {
    NumpyDataset d = open(npz(kX, y));
    EXPECT_EQ(ys(d, {0, 1, 2}), (std::vector<int64_t>{4, 0, 9})) << descr;
    EXPECT_EQ(d.get_batch(std::vector<int64_t>{0}).y.dtype(), DType::i64) << descr;
    EXPECT_EQ(d.num_classes(), 10) << descr;
  }
  NumpyDataset b = open(npz(kX, npy<bool>("|b1", {3}, {1, 0, 1})));
  EXPECT_EQ(ys(b, {0, 1, 2}), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(b.num_classes(), 2);
}

TEST_F(NumpyData, SampleShapeDropsTheFirstDim) {
  NumpyDataset d = open(npz(npy<float>("<f4", {2, 1, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}),
                            npy<int64_t>("<i8", {2}, {1, 0})));
  EXPECT_EQ(d.sample_shape(), (Shape{1, 2, 2}));
  Batch b = d.get_batch(std::vector<int64_t>{1});
  EXPECT_EQ(b.x.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(b.x.to_vector<float>(), (std::vector<float>{4, 5, 6, 7}));
}

TEST_F(NumpyData, StandardizeSubtractsTheMeanAndDividesByTheStd) {
  const std::string path =
      npz(npy<uint8_t>("|u1", {2, 2}, {2, 6, 10, 0}), npy<int64_t>("<i8", {2}, {0, 1}));
  EXPECT_EQ(xs(open(path, {.mean = 2, .std = 4}), {0, 1}), (std::vector<float>{0, 1, 2, -0.5f}));
  expect_error<InvalidArgument>([&] { open(path, {.mean = 0, .std = 0}); }, {"std > 0"});
}

TEST_F(NumpyData, DirectoryFormReadsKeyNpyFiles) {
  write("d/x.npy", kX);
  write("d/y.npy", kY);
  write("d/x_test.npy", npy<double>("<f8", {1, 2}, {8, 9}));
  write("d/y_test.npy", npy<int32_t>("<i4", {1}, {3}));
  const std::string dir = (dir_ / "d").string();
  NumpyDataset d = open(dir);
  EXPECT_EQ(d.path(), dir);
  EXPECT_EQ(xs(d, {1}), (std::vector<float>{2, 3}));
  NumpyDataset test({.path = dir, .x_key = "x_test", .y_key = "y_test"});
  EXPECT_EQ(xs(test, {0}), (std::vector<float>{8, 9}));
  EXPECT_EQ(test.num_classes(), 4);
  EXPECT_TRUE(npz_has(dir, "x_test"));
  EXPECT_FALSE(npz_has(dir, "x_val"));
  expect_error<IoError>([&] { NumpyDataset({.path = dir, .x_key = "x_val"}); },
                        {"x_val.npy does not exist", "x.npy, x_test.npy, y.npy, y_test.npy"});
}

TEST_F(NumpyData, NpzHasFindsOptionalSplits) {
  const std::string path =
      write("s.npz", zip({{"x.npy", kX}, {"y.npy", kY}, {"x_test.npy", kX}, {"y_test", kY}}));
  EXPECT_TRUE(npz_has(path, "x_test"));
  EXPECT_TRUE(npz_has(path, "y_test"));  // a member named without .npy, as np.load allows
  EXPECT_FALSE(npz_has(path, "x_val"));
  EXPECT_EQ(NumpyDataset({.path = path, .x_key = "x_test", .y_key = "y_test"}).size(), 3);
  expect_error<IoError>([&] { npz_has((dir_ / "none.npz").string(), "x"); }, {"does not exist"});
}

TEST_F(NumpyData, Zip64RecordsAndExtraFieldsAreFollowed) {
  NumpyDataset d = open(write("z.npz", zip({{"x.npy", kX}, {"y.npy", kY}}, true)));
  EXPECT_EQ(xs(d, {2}), (std::vector<float>{4, 5}));
  EXPECT_EQ(ys(d, {2}), (std::vector<int64_t>{1}));
}

TEST_F(NumpyData, DeflatedMembersAreInflatedAndCrcChecked) {
  NumpyDataset d = open(write("c.npz", zip({{"x.npy", kX, true}, {"y.npy", kY, true}})));
  EXPECT_EQ(xs(d, {1, 2}), (std::vector<float>{2, 3, 4, 5}));
  const std::string bad = write("bad.npz", zip({{"x.npy", kX, true, 1}, {"y.npy", kY, true}}));
  expect_error<InvalidArgument>([&] { open(bad); }, {"bad.npz:x.npy", "CRC-32"});
}

TEST_F(NumpyData, HeadersParseWhateverTheSpacingQuotesAndVersion) {
  const Bytes data = kX.substr(kX.size() - 24);
  const std::pair<std::string, int> headers[] = {
      {"{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(3,2)}", 1},
      {"{ 'shape' : ( 3 , 2 , ) , 'fortran_order' : False , 'descr' : '<f4' , }", 2},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 2L), }", 3}};
  for (const auto& [header, major] : headers) {
    NumpyDataset d = open(npz(npy_with_header(header, data, major), kY));
    EXPECT_EQ(xs(d, {1}), (std::vector<float>{2, 3})) << header;
  }
}

TEST_F(NumpyData, CopiesShareTheMappingAndOutliveTheOriginal) {
  auto original = std::make_unique<NumpyDataset>(open(npz(kX, kY)));
  NumpyDataset copy = *original;
  original.reset();
  EXPECT_EQ(xs(copy, {0, 2}), (std::vector<float>{0, 1, 4, 5}));
  expect_error<InvalidArgument>([&] { copy.get_batch(std::vector<int64_t>{3}); },
                                {"out of range [0, 3)"});
}

TEST_F(NumpyData, BadMagicNamesTheMember) {
  expect_refused("not an array at all", kY, {"data.npz:x.npy", "not a .npy", "\\x93NUMPY"});
}

TEST_F(NumpyData, BigEndianIsRefused) {
  expect_refused(npy<float>(">f4", {3, 2}, {0, 1, 2, 3, 4, 5}), kY,
                 {"data.npz:x.npy", "'>f4' is big-endian", "little-endian"});
}

TEST_F(NumpyData, FortranOrderIsRefused) {
  expect_refused(npy<float>("<f4", {3, 2}, {0, 1, 2, 3, 4, 5}, "True"), kY,
                 {"data.npz:x.npy", "fortran_order is True", "C-order"});
}

TEST_F(NumpyData, MismatchedSampleCountsNameBothShapes) {
  expect_refused(kX, npy<int64_t>("<i8", {2}, {0, 1}), {"[3, 2]", "[2]", "first dimensions"});
}

TEST_F(NumpyData, NegativeLabelNamesIndexAndValue) {
  expect_refused(kX, npy<int32_t>("<i4", {3}, {0, -5, 1}),
                 {"data.npz:y.npy", "label 1 is -5", ">= 0"});
}

TEST_F(NumpyData, MissingMemberListsTheMembers) {
  const std::string path = write("m.npz", zip({{"a.npy", kX}, {"y.npy", kY}}));
  expect_error<InvalidArgument>([&] { open(path); },
                                {"m.npz has no array 'x'", "x.npy", "'a', 'y'"});
}

TEST_F(NumpyData, MissingFileIsAnIoError) {
  expect_error<IoError>([&] { open((dir_ / "absent.npz").string()); },
                        {"absent.npz does not exist", "x.npy and y.npy"});
}

TEST_F(NumpyData, OtherUnreadableArraysAreRefused) {
  const Bytes y = kY;
  expect_refused(npy_with_header("{'descr': '|O', 'fortran_order': False, 'shape': (3, 2), }",
                                 Bytes(48, '\0')),
                 y, {"data.npz:x.npy", "Python objects"});
  expect_refused(npy<float>("<f4", {}, {1}), y, {"0-d array", "inputs [N, ...]"});
  expect_refused(npy<float>("<f4", {3}, {1, 2, 3}), y, {"[3]", "x.reshape(-1, 1)"});
  expect_refused(npy<uint16_t>("<f2", {3, 2}, {0, 0, 0, 0, 0, 0}), y, {"'<f2'", "float32 '<f4'"});
  expect_refused(kX, npy<float>("<f4", {3}, {0, 1, 2}), {"data.npz:y.npy", "'<f4'", "astype"});
  expect_refused(kX, npy<int64_t>("<i8", {3, 1}, {0, 1, 2}), {"[3, 1]", "labels [N]"});
  expect_refused(npy_with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': "
                                 "(3,), }",
                                 Bytes(12, '\0')),
                 y, {"structured dtype"});
  expect_refused(npy_with_header("{'descr': '<f4', 'shape': (3, 2), }", Bytes(24, '\0')), y,
                 {"no 'fortran_order'"});
  expect_refused(npy_with_header("{'descr': '<f4' 'shape': (3, 2)}", Bytes(24, '\0')), y,
                 {"cannot parse the .npy header at character", "expected '}'"});
  Bytes v4 = kX;
  v4[6] = 4;
  expect_refused(v4, y, {"version 4.0"});
  expect_refused(kX + "extra", y, {"more than the 24"});
  expect_refused(kX, npy<int64_t>("<i8", {0}, {}), {"[3, 2]", "[0]"});
  expect_refused(npy<float>("<f4", {0, 2}, {}), npy<int64_t>("<i8", {0}, {}), {"hold no values"});
}

TEST_F(NumpyData, TruncatedFilesAreIoErrors) {
  write("t/x.npy", kX.substr(0, kX.size() - 4));
  write("t/y.npy", kY);
  expect_error<IoError>([&] { open((dir_ / "t").string()); },
                        {"x.npy", "holds 20 bytes", "needs 24", "truncated"});
  const Bytes whole = zip({{"x.npy", kX}, {"y.npy", kY}}, true);
  const std::string cut = write("cut.npz", whole.substr(0, 200) + whole.substr(whole.size() - 98));
  expect_error<IoError>([&] { open(cut); }, {"cut.npz", "past the end", "truncated"});
  const std::string head = write("head.npz", whole.substr(0, 300));
  expect_error<IoError>([&] { open(head); }, {"head.npz", "without its end record", "truncated"});
}

TEST_F(NumpyData, NotAZipOrASingleNpyIsNamed) {
  const std::string single = write("x.npy", kX);
  expect_error<InvalidArgument>([&] { open(single); }, {"single .npy array", "np.savez"});
  const std::string text = write("notes.npz", "just some text, long enough for a record");
  expect_error<InvalidArgument>([&] { open(text); }, {"notes.npz", "not a zip archive"});
}

// np.savez stores members (and writes zip64 local headers); np.savez_compressed deflates them.
TEST_F(NumpyData, ReadsArchivesNumpyWrote) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with numpy is not installed";
  }
  const std::string stored = (dir_ / "stored.npz").string();
  const std::string packed = (dir_ / "packed.npz").string();
  const std::string script =
      "import numpy as np; x = (np.arange(600, dtype=np.float32) / 7).reshape(50, 3, 4); "
      "y = np.arange(50) % 6; "
      "np.savez('" +
      stored +
      "', x=x, y=y, x_test=x[:5], y_test=y[:5]); "
      "np.savez_compressed('" +
      packed + "', x=x.astype(np.float64), y=y.astype(np.int32))";
  ASSERT_EQ(std::system(("/usr/bin/python3 -c \"" + script + "\"").c_str()), 0) << script;
  for (const std::string& path : {stored, packed}) {
    NumpyDataset d = open(path);
    EXPECT_EQ(d.size(), 50) << path;
    EXPECT_EQ(d.sample_shape(), (Shape{3, 4})) << path;
    EXPECT_EQ(d.num_classes(), 6) << path;
    const std::vector<float> x = xs(d, {49, 7});
    for (int j = 0; j < 12; ++j) {
      EXPECT_FLOAT_EQ(x[size_t(j)], float(49 * 12 + j) / 7.0f) << path << " " << j;
      EXPECT_FLOAT_EQ(x[size_t(12 + j)], float(7 * 12 + j) / 7.0f) << path << " " << j;
    }
    EXPECT_EQ(ys(d, {49, 7}), (std::vector<int64_t>{1, 1})) << path;
  }
  EXPECT_TRUE(npz_has(stored, "x_test"));
  EXPECT_FALSE(npz_has(packed, "x_test"));
  EXPECT_EQ(NumpyDataset({.path = stored, .x_key = "x_test", .y_key = "y_test"}).size(), 5);
}

}  // namespace
}  // namespace cohort::data
