// safetensors reader/writer: round trips, the exact bytes of the format, a numpy reader, and
// the error each kind of corrupt file gets.
#include "cohort/ckpt/safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "tests/ckpt/ckpt_test_util.h"
#include "tests/support/files.h"

namespace cohort::ckpt {
namespace {
using cohort::testing::read_bytes;
using cohort::testing::TempDir;
using cohort::testing::write_bytes;
using testing::bitwise_equal;
using testing::patterned;
using testing::same_tensors;

TEST(Safetensors, RoundTripEveryDtypeScalarAndEmpty) {
  TempDir tmp;
  NamedTensors in = {
      {"f32", patterned({3, 4}, DType::f32, 1)},   {"f64", patterned({5}, DType::f64, 2)},
      {"f16", patterned({2, 3}, DType::f16, 3)},   {"bf16", patterned({7}, DType::bf16, 4)},
      {"i32", patterned({2, 2}, DType::i32, 5)},   {"i64", patterned({3}, DType::i64, 6)},
      {"u8", patterned({9}, DType::u8, 7)},        {"scalar", patterned({}, DType::f64, 8)},
      {"empty", patterned({0, 3}, DType::f32, 9)}, {"last", patterned({1, 1, 2}, DType::i64, 10)},
  };
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "42"}};
  const std::string path = tmp.file("all.safetensors");
  write_safetensors(path, in, meta);
  std::map<std::string, std::string> got_meta = {{"stale", "entry"}};
  NamedTensors out = read_safetensors(path, &got_meta);
  EXPECT_TRUE(same_tensors(in, out));  // file offset order == the order given
  EXPECT_EQ(got_meta, meta);
  EXPECT_EQ(out[7].second.dim(), 0);
  EXPECT_EQ(out[8].second.shape(), (Shape{0, 3}));
}

TEST(Safetensors, NoMetadataGivesEmptyMap) {
  TempDir tmp;
  write_safetensors(tmp.file("a.st"), {{"x", patterned({2}, DType::u8, 0)}});
  std::map<std::string, std::string> meta = {{"old", "x"}};
  read_safetensors(tmp.file("a.st"), &meta);
  EXPECT_TRUE(meta.empty());
  EXPECT_EQ(read_bytes(tmp.file("a.st")).find("__metadata__"), std::string::npos);
}

TEST(Safetensors, NonContiguousWrittenContiguousBitExact) {
  TempDir tmp;
  // i64 values above 2^53 would be corrupted by any float round trip.
  Tensor base = from_vector_i64({(1ll << 60) + 1, 2, 3, (1ll << 62) + 7, 5, -6}, {2, 3});
  Tensor t = base.as_strided({3, 2}, {1, 3}, 0);  // the transpose
  write_safetensors(tmp.file("t.st"), {{"t", t}});
  NamedTensors out = read_safetensors(tmp.file("t.st"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].second.shape(), (Shape{3, 2}));
  EXPECT_EQ(out[0].second.to_vector<int64_t>(),
            (std::vector<int64_t>{(1ll << 60) + 1, (1ll << 62) + 7, 2, 5, 3, -6}));
}

TEST(Safetensors, ExactBytesOfATinyFile) {
  TempDir tmp;
  Tensor b = empty({}, DType::u8);
  *b.data<uint8_t>() = 7;
  write_safetensors(tmp.file("tiny.st"), {{"a", from_vector({1.0f, -2.0f}, {2})}, {"b", b}},
                    {{"k", "v"}});
  // 130 bytes of JSON + 6 spaces = 136 = 0x88; then 1.0f, -2.0f (LE), then the u8 7.
  const std::string json =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"U8","shape":[],"data_offsets":[8,9]}}      )";
  const std::string expected = std::string("\x88\0\0\0\0\0\0\0", 8) + json +
                               std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0\x07", 9);
  EXPECT_EQ(json.size(), 136u);
  EXPECT_EQ(read_bytes(tmp.file("tiny.st")), expected);
}

TEST(Safetensors, BadNamesAreInvalidArgument) {
  TempDir tmp;
  Tensor x = zeros({2});
  EXPECT_THROW(write_safetensors(tmp.file("d.st"), {{"x", x}, {"x", x}}), InvalidArgument);
  EXPECT_THROW(write_safetensors(tmp.file("e.st"), {{"", x}}), InvalidArgument);
  EXPECT_THROW(write_safetensors(tmp.file("m.st"), {{"__metadata__", x}}), InvalidArgument);
  EXPECT_THROW(write_safetensors(tmp.file("u.st"), {{"u", Tensor()}}), InvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(tmp.file("d.st")));  // checked before the file is created
}

TEST(Safetensors, WriteIntoMissingDirectoryNamesPath) {
  TempDir tmp;
  const std::string path = tmp.file("no/such/dir/x.st");
  try {
    write_safetensors(path, {{"x", zeros({1})}});
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// A python3 with numpy reads our file with json + struct + numpy only (no safetensors package).
TEST(Safetensors, NumpyReaderGetsSameValues) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with numpy is not available";
  TempDir tmp;
  Tensor bf = empty({3}, DType::bf16);
  bf.data<BFloat16>()[0] = BFloat16(1.5f);
  bf.data<BFloat16>()[1] = BFloat16(-0.25f);
  bf.data<BFloat16>()[2] = BFloat16(3.0f);
  Tensor h = empty({2}, DType::f16);
  h.data<Float16>()[0] = Float16(0.5f);
  h.data<Float16>()[1] = Float16(-8.0f);
  write_safetensors(tmp.file("py.st"), {{"w", from_vector({1.25f, -2.5f, 3.0f, 4.5f}, {2, 2})},
                                        {"n", from_vector_i64({-7, 1ll << 40}, {2})},
                                        {"h", h},
                                        {"bf", bf}});
  write_bytes(tmp.file("read.py"), R"PY(
import json, struct, sys
import numpy as np
DT = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I32": "<i4", "I64": "<i8", "U8": "u1", "BF16": "<u2"}
with open(sys.argv[1], "rb") as f:
    buf = f.read()
(n,) = struct.unpack("<Q", buf[:8])
header = json.loads(buf[8:8 + n])
out = []
for name, info in header.items():
    if name == "__metadata__":
        continue
    b, e = info["data_offsets"]
    a = np.frombuffer(buf[8 + n + b:8 + n + e], dtype=DT[info["dtype"]]).reshape(info["shape"])
    if info["dtype"] == "BF16":
        a = (a.astype(np.uint32) << 16).view(np.float32)
    out.append(name + "=" + ",".join(repr(x.item()) for x in a.flatten()))
print(";".join(sorted(out)))
)PY");
  const std::string cmd = "/usr/bin/python3 " + tmp.file("read.py") + " " + tmp.file("py.st");
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[1024];
  std::string output;
  while (size_t n = fread(buf, 1, sizeof buf, p)) output.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << output;
  EXPECT_EQ(output, "bf=1.5,-0.25,3.0;h=0.5,-8.0;n=-7,1099511627776;w=1.25,-2.5,3.0,4.5\n");
}

// ---- corrupt files: each gets an IoError naming the file and the problem ----

std::string file_with_header(const std::string& json, size_t data_bytes) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = char(uint64_t(json.size()) >> (8 * i));
  return bytes + json + std::string(data_bytes, '\x01');
}

void expect_io_error(const std::string& path, const std::string& problem) {
  try {
    read_safetensors(path);
    FAIL() << "expected IoError containing '" << problem << "'";
  } catch (const IoError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(problem), std::string::npos) << msg;
  }
}

TEST(SafetensorsCorrupt, Truncated) {
  TempDir tmp;
  const std::string path = tmp.file("t.st");
  write_safetensors(path, {{"a", zeros({4})}, {"b", zeros({4})}});
  std::string bytes = read_bytes(path);
  write_bytes(path, bytes.substr(0, bytes.size() - 3));
  expect_io_error(path, "tensor 'b': data_offsets [16, 32] out of range");
  write_bytes(path, bytes.substr(0, 5));
  expect_io_error(path, "too short");
}

TEST(SafetensorsCorrupt, HeaderLengthBeyondFile) {
  TempDir tmp;
  const std::string path = tmp.file("h.st");
  write_safetensors(path, {{"a", zeros({4})}});
  std::string bytes = read_bytes(path);
  bytes[5] = '\x10';  // a header length of ~2^40
  write_bytes(path, bytes);
  expect_io_error(path, "goes beyond the end of the file");
}

TEST(SafetensorsCorrupt, BadJson) {
  TempDir tmp;
  const std::string path = tmp.file("j.st");
  write_bytes(path, file_with_header(R"({"a":{"dtype":"F32",)", 0));
  expect_io_error(path, "header is not valid JSON");
  write_bytes(path, file_with_header(R"([1,2])", 0));
  expect_io_error(path, "not an object");
}

TEST(SafetensorsCorrupt, OverlappingOffsets) {
  TempDir tmp;
  const std::string path = tmp.file("o.st");
  write_bytes(path, file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                     12));
  expect_io_error(path, "tensor 'b' data_offsets [4, 12] overlap tensor 'a' [0, 8]");
}

TEST(SafetensorsCorrupt, OffsetsOutOfRangeHoleAndWrongSize) {
  TempDir tmp;
  const std::string path = tmp.file("r.st");
  write_bytes(path,
              file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", 8));
  expect_io_error(path, "tensor 'a': data_offsets [0, 16] out of range");
  write_bytes(path,
              file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12));
  expect_io_error(path, "bytes [0, 4) of the data belong to no tensor");
  write_bytes(path,
              file_with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
  expect_io_error(path, "tensor 'a' (F32 [3]) needs 12 bytes but data_offsets [0, 8] hold 8");
  write_bytes(path,
              file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 12));
  expect_io_error(path, "the data section holds 12 bytes but the tensors cover only 8");
}

TEST(SafetensorsCorrupt, UnknownDtypeAndBadShape) {
  TempDir tmp;
  const std::string path = tmp.file("d.st");
  write_bytes(path,
              file_with_header(R"({"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", 8));
  expect_io_error(path, "tensor 'a': unknown dtype 'Q7'");
  write_bytes(path,
              file_with_header(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8));
  expect_io_error(path, "is not a non-negative integer");
}

// Found with the safetensors_fuzz target's UBSan, on a hand-made input (its random runs had not
// reached it): an empty tensor whose other dims multiply past int64 overflowed the strides.
TEST(SafetensorsCorrupt, EmptyTensorWithHugeDimsIsRefused) {
  TempDir tmp;
  const std::string path = tmp.file("z.st");
  write_bytes(
      path,
      file_with_header(
          R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})", 0));
  expect_io_error(path,
                  "tensor 'a': shape [0, 4611686018427387904] then 4: the product of its dims");
  // Large but representable dims around a 0 are still a valid empty tensor.
  write_bytes(
      path,
      file_with_header(
          R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,1],"data_offsets":[0,0]}})", 0));
  NamedTensors out = read_safetensors(path);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].second.numel(), 0);
}

// Found with the safetensors_fuzz target's ASan, on a hand-made input (too long for its
// -max_len): describing a malformed shape or metadata value with json::dump() recursed once per
// nesting level, so 100k nested arrays overflowed the stack.
TEST(SafetensorsCorrupt, DeeplyNestedValuesAreRefusedWithoutRecursing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string shape_file = file_with_header(
      R"({"a":{"dtype":"U8","shape":[1,)" + deep + R"(],"data_offsets":[0,1]}})", 1);
  const std::string meta_file = file_with_header(R"({"__metadata__":{"k":)" + deep + "}}", 0);
  auto problem = [](const std::string& bytes) -> std::string {
    try {
      parse_safetensors({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "deep.st");
    } catch (const IoError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(problem(shape_file)
                .find("deep.st: tensor 'a': \"shape\" entry an array of 1 entries"
                      " is not a non-negative integer"),
            std::string::npos)
      << problem(shape_file);
  EXPECT_NE(problem(meta_file).find("deep.st: __metadata__ value for 'k' is an array of 1 entries"),
            std::string::npos)
      << problem(meta_file);
}

// parse_safetensors is read_safetensors over bytes: the same tensors, metadata and errors.
TEST(Safetensors, ParseFromBytesMatchesFile) {
  TempDir tmp;
  const std::string path = tmp.file("b.st");
  NamedTensors in = {{"w", patterned({2, 3}, DType::f32, 1)}, {"s", patterned({}, DType::i64, 2)}};
  write_safetensors(path, in, {{"step", "3"}});
  const std::string bytes = read_bytes(path);
  std::map<std::string, std::string> meta;
  NamedTensors out = parse_safetensors(
      {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "mem", &meta);
  EXPECT_TRUE(same_tensors(in, out));
  EXPECT_EQ(meta, (std::map<std::string, std::string>{{"step", "3"}}));
  const std::string cut = bytes.substr(0, bytes.size() - 1);
  EXPECT_THROW(parse_safetensors({reinterpret_cast<const uint8_t*>(cut.data()), cut.size()}, "mem"),
               IoError);
}

TEST(SafetensorsCorrupt, MissingFileNamesPath) {
  TempDir tmp;
  expect_io_error(tmp.file("absent.st"), "cannot open");
}

}  // namespace
}  // namespace cohort::ckpt
