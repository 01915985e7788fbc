// CsvDataset (cohort/data/csv.h): rows of a user's CSV file read back exactly, in any batch
// order and from several threads, and every malformed file stopped with its file:line.
#include "cohort/data/csv.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include "tests/support/files.h"
#include "tests/unit/data_test_util.h"

namespace cohort::data {
namespace {

namespace fs = std::filesystem;

class CsvDatasetTest : public ::testing::Test {
 protected:
  // Writes `text` byte for byte (CRLF stays CRLF) and returns options naming the file.
  CsvOptions file(const std::string& text, const std::string& name = "data.csv") {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    CsvOptions o;
    o.path = path;
    return o;
  }
  testing::TempDir tmp_;
  const fs::path dir_{tmp_.path()};
};

// Errors a file's text gets from the constructor.
void expect_csv_error(const CsvOptions& o, std::initializer_list<std::string> words) {
  expect_error<InvalidArgument>([&] { CsvDataset d(o); }, words);
}

Batch batch(const CsvDataset& d, std::vector<int64_t> indices) {
  return d.get_batch(indices);
}

Batch all_rows(const CsvDataset& d) {
  std::vector<int64_t> indices(size_t(d.size()));
  std::iota(indices.begin(), indices.end(), 0);
  return d.get_batch(indices);
}

using Floats = std::vector<float>;
using Labels = std::vector<int64_t>;

TEST_F(CsvDatasetTest, HeaderAndLabelLast) {
  CsvDataset d(file("a,b,c,label\n1,2.5,-3,0\n4e-3, 5 ,+6,2\n"));
  EXPECT_EQ(d.size(), 2);
  EXPECT_EQ(d.features(), 3);
  EXPECT_EQ(d.sample_shape(), Shape({3}));
  EXPECT_EQ(d.num_classes(), 3);
  EXPECT_EQ(d.column_names(), std::vector<std::string>({"a", "b", "c", "label"}));
  Batch b = all_rows(d);
  EXPECT_EQ(b.x.shape(), Shape({2, 3}));
  EXPECT_EQ(b.x.to_vector<float>(), Floats({1, 2.5f, -3, 4e-3f, 5, 6}));
  EXPECT_EQ(b.y.to_vector<int64_t>(), Labels({0, 2}));
}

TEST_F(CsvDatasetTest, NoHeaderLabelFirstByNumber) {
  CsvOptions o = file("3,1,2\n1.0,-0.5,255\n");
  o.label_column = "0";
  CsvDataset d(o);
  EXPECT_EQ(d.column_names(), std::vector<std::string>({"0", "1", "2"}));
  Batch b = all_rows(d);
  EXPECT_EQ(b.x.to_vector<float>(), Floats({1, 2, -0.5f, 255}));
  EXPECT_EQ(b.y.to_vector<int64_t>(), Labels({3, 1}));
  EXPECT_EQ(d.num_classes(), 4);
}

TEST_F(CsvDatasetTest, QuotedHeaderAndLabelByName) {
  CsvOptions o = file("\"px1\", \"label\" ,\"p\"\"x2\"\n0.25,1,\"7\"\n-1,0,8\n");
  o.label_column = "label";
  CsvDataset d(o);
  EXPECT_EQ(d.column_names(), std::vector<std::string>({"px1", "label", "p\"x2"}));
  Batch b = all_rows(d);
  EXPECT_EQ(b.x.to_vector<float>(), Floats({0.25f, 7, -1, 8}));
  EXPECT_EQ(b.y.to_vector<int64_t>(), Labels({1, 0}));
}

TEST_F(CsvDatasetTest, CrlfByteOrderMarkNoFinalNewlineAndTrailingBlankLines) {
  for (const std::string& text :
       {std::string("x,y\r\n1,0\r\n2,1"), std::string("\xEF\xBB\xBFx,y\r\n1,0\r\n2,1\r\n\r\n  \n"),
        std::string("\xEF\xBB\xBF"
                    "1,0\n2,1\n\n")}) {
    CsvDataset d(file(text));
    Batch b = all_rows(d);
    EXPECT_EQ(b.x.to_vector<float>(), Floats({1, 2})) << text;
    EXPECT_EQ(b.y.to_vector<int64_t>(), Labels({0, 1})) << text;
  }
}

TEST_F(CsvDatasetTest, StandardizeAppliesToEveryFeature) {
  CsvOptions o = file("a,b,y\n1,3,0\n-1,5,1\n");
  o.standardize = {.mean = 1.0f, .std = 2.0f};
  Batch b = all_rows(CsvDataset(o));
  EXPECT_EQ(b.x.to_vector<float>(), Floats({0, 1, -1, 2}));
  EXPECT_EQ(b.y.to_vector<int64_t>(), Labels({0, 1}));  // the label is not standardized
}

TEST_F(CsvDatasetTest, ReshapesRows) {
  CsvOptions o = file("1,2,3,4,0\n5,6,7,8,1\n");
  o.shape = {1, 2, 2};
  CsvDataset d(o);
  EXPECT_EQ(d.sample_shape(), Shape({1, 2, 2}));
  Batch b = batch(d, {1});
  EXPECT_EQ(b.x.shape(), Shape({1, 1, 2, 2}));
  EXPECT_EQ(b.x.to_vector<float>(), Floats({5, 6, 7, 8}));
}

TEST_F(CsvDatasetTest, OtherDelimiters) {
  CsvOptions semi = file("a;b;y\n1,5;2;0\n");  // a comma is just text here, so "1,5" fails
  semi.delimiter = ';';
  expect_csv_error(semi, {"data.csv:2:", "field 1 ('1,5')", "is not a number"});
  CsvOptions tab = file("a\tb\ty\n 1\t2 \t0\n", "tab.tsv");
  tab.delimiter = '\t';
  EXPECT_EQ(all_rows(CsvDataset(tab)).x.to_vector<float>(), Floats({1, 2}));
}

TEST_F(CsvDatasetTest, RepeatedAndOutOfOrderIndices) {
  CsvDataset d(file("10,0\n11,1\n12,2\n"));
  Batch b = batch(d, {2, 0, 2, 1});
  EXPECT_EQ(b.x.to_vector<float>(), Floats({12, 10, 12, 11}));
  EXPECT_EQ(b.y.to_vector<int64_t>(), Labels({2, 0, 2, 1}));
  expect_error<InvalidArgument>([&] { batch(d, {3}); }, {"index 3", "out of range [0, 3)"});
}

TEST_F(CsvDatasetTest, NumClassesIsOnePlusTheLargestLabel) {
  CsvDataset d(file("f,label\n0.5,0\n0.5,7.0\n0.5,3\n"));
  EXPECT_EQ(d.num_classes(), 8);
  EXPECT_EQ(all_rows(d).y.to_vector<int64_t>(), Labels({0, 7, 3}));
}

TEST_F(CsvDatasetTest, HeaderOption) {
  CsvOptions forced = file("1,2,3\n4,5,6\n");
  forced.header = "true";
  CsvDataset d(forced);
  EXPECT_EQ(d.size(), 1);
  EXPECT_EQ(d.column_names(), std::vector<std::string>({"1", "2", "3"}));
  CsvOptions none = file("a,b\n1,0\n");
  none.header = "false";
  expect_csv_error(none, {"data.csv:1:", "field 1 ('a') is not a number"});
  none.header = "yes";
  expect_csv_error(none, {"header must be", "\"yes\""});
}

TEST_F(CsvDatasetTest, CopiesShareTheOpenFile) {
  auto first = std::make_unique<CsvDataset>(file("1,0\n2,1\n"));
  CsvDataset copy = *first;
  first.reset();  // the copy keeps the descriptor open
  EXPECT_EQ(batch(copy, {1}).x.to_vector<float>(), Floats({2}));
}

TEST_F(CsvDatasetTest, ALineLongerThanTheReadChunk) {
  std::string row;
  for (int j = 0; j < 700000; ++j) row += "1,";  // 1.4 MB: the 1 MiB buffer must grow
  CsvDataset d(file(row + "0\n" + row + "1\n"));
  EXPECT_EQ(d.features(), 700000);
  Batch b = batch(d, {1});
  EXPECT_EQ(b.x.to_vector<float>(), Floats(700000, 1.0f));
  EXPECT_EQ(b.y.to_vector<int64_t>(), Labels({1}));
}

TEST_F(CsvDatasetTest, ConcurrentBatchesAgree) {
  std::string text = "a,b,y\n";
  for (int r = 0; r < 500; ++r) text += std::to_string(r) + "," + std::to_string(-r) + ",1\n";
  const CsvDataset d(file(text));
  auto run = [&](Floats* out) {
    std::vector<int64_t> indices(100);  // per thread: only the dataset is shared
    for (int rep = 0; rep < 20; ++rep) {
      for (size_t k = 0; k < indices.size(); ++k) indices[k] = int64_t((k * 37 + rep) % 500);
      Floats x = d.get_batch(indices).x.to_vector<float>();
      out->insert(out->end(), x.begin(), x.end());
    }
  };
  Floats serial, t1, t2;
  run(&serial);
  std::thread a([&] { run(&t1); });
  std::thread b([&] { run(&t2); });
  a.join();
  b.join();
  EXPECT_EQ(t1, serial);
  EXPECT_EQ(t2, serial);
}

// 20,000 rows x 50 columns (about 4 MB, several read chunks): random rows come back exactly.
TEST_F(CsvDatasetTest, LargerFile) {
  constexpr int kRows = 20000, kCols = 50;
  auto value = [](int r, int c) { return float((r * 31 + c * 7) % 1000) / 8.0f - 60.0f; };
  std::string text;
  char num[32];
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c + 1 < kCols; ++c) {
      text.append(num, size_t(std::snprintf(num, sizeof num, "%g,", double(value(r, c)))));
    }
    text += std::to_string(r % 10) + (r % 2 ? "\r\n" : "\n");
  }
  CsvDataset d(file(text));
  ASSERT_EQ(d.size(), kRows);
  EXPECT_EQ(d.num_classes(), 10);
  std::mt19937 rng(5);
  std::vector<int64_t> rows{0, kRows - 1};
  for (int k = 0; k < 30; ++k) rows.push_back(int64_t(rng() % kRows));
  Batch b = d.get_batch(rows);
  const Floats x = b.x.to_vector<float>();
  const Labels y = b.y.to_vector<int64_t>();
  for (size_t k = 0; k < rows.size(); ++k) {
    const int r = int(rows[k]);
    EXPECT_EQ(y[k], r % 10);
    for (int c = 0; c + 1 < kCols; ++c) ASSERT_EQ(x[k * (kCols - 1) + size_t(c)], value(r, c));
  }
}

TEST_F(CsvDatasetTest, WrongFieldCountNamesTheLine) {
  expect_csv_error(file("a,b,y\n1,2,0\n1,2,3,0\n"),
                   {"data.csv:3: expected 3 fields (as in line 1), got 4"});
  expect_csv_error(file("1,2,0\n1,0\n"), {"data.csv:2: expected 3 fields (as in line 1), got 2"});
}

TEST_F(CsvDatasetTest, BadFeaturesNameLineFieldAndColumn) {
  expect_csv_error(file("a,b,y\n1,2,0\n3,abc,1\n"),
                   {"data.csv:3: field 2 ('abc') in column 'b' is not a number"});
  expect_csv_error(file("1,2,0\n1.5x,2,0\n"), {"data.csv:2: field 1 ('1.5x') is not a number"});
  expect_csv_error(file("a,b,y\n1,,0\n"), {"data.csv:2: field 2 ('')", "is empty"});
  expect_csv_error(file("a,b,y\n1,nan,0\n"), {"data.csv:2: field 2 ('nan')", "not finite"});
  expect_csv_error(file("a,b,y\ninf,1,0\n"), {"data.csv:2: field 1 ('inf')", "not finite"});
  expect_csv_error(file("a,b,y\n1,1e39,0\n"), {"data.csv:2:", "'1e39'", "range of float32"});
  expect_csv_error(file("a,b,y\n1,\"2,0\n"), {"data.csv:2: field 2 opens a quote"});
  expect_csv_error(file("a,b,y\n1,\"2\"x,0\n"), {"data.csv:2: field 2 has text after"});
  expect_csv_error(file("a,b,y\n1,2,0\r3,4,1\n"), {"data.csv:2:", "carriage return"});
}

TEST_F(CsvDatasetTest, TinyValuesRoundToZeroInsteadOfFailing) {
  EXPECT_EQ(all_rows(CsvDataset(file("1e-50,0\n"))).x.to_vector<float>(), Floats({0}));
}

TEST_F(CsvDatasetTest, BadLabelsNameLineAndColumn) {
  for (const std::string label : {"x", "-1", "2.5", "", "nan"}) {
    expect_csv_error(
        file("a,label\n1,0\n2," + label + "\n"),
        {"data.csv:3: label '" + label + "' in column 'label' is not a non-negative integer"});
  }
  expect_csv_error(file("1,0\n2,x\n"), {"data.csv:2: label 'x' in field 2 is not"});
  expect_csv_error(file("a,label\n1,1e12\n"), {"data.csv:2:", "larger than 2147483647"});
}

TEST_F(CsvDatasetTest, BlankLineInTheMiddleNamesIt) {
  expect_csv_error(file("a,y\n1,0\n\n2,1\n"), {"data.csv:3: blank line", "line 4"});
  expect_csv_error(file("\na,y\n1,0\n"), {"data.csv:1: blank line", "line 2"});
}

TEST_F(CsvDatasetTest, MissingEmptyAndHeaderOnlyFiles) {
  CsvOptions missing;
  missing.path = (dir_ / "nope.csv").string();
  expect_error<IoError>([&] { CsvDataset d(missing); }, {missing.path, "cannot open"});
  CsvOptions directory;
  directory.path = dir_.string();
  expect_error<IoError>([&] { CsvDataset d(directory); }, {"not a regular file"});
  expect_csv_error(file(""), {"data.csv: no data rows", "empty"});
  expect_csv_error(file("\n\n"), {"data.csv: no data rows", "blank"});
  expect_csv_error(file("a,b,label\n"), {"data.csv: no data rows", "only a header"});
  expect_csv_error(file("a,b,label\r\n\r\n"), {"data.csv: no data rows", "only a header"});
  expect_csv_error(file("abc\n1\n"), {"data.csv:1: found 1 field", "delimiter ','"});
}

TEST_F(CsvDatasetTest, LabelColumnErrors) {
  CsvOptions o = file("a,b,label\n1,2,0\n");
  o.label_column = "lable";
  expect_csv_error(o, {"label_column 'lable' is not a column", "'a', 'b', 'label'"});
  o.label_column = "3";
  expect_csv_error(o, {"label_column 3 is out of range", "3 columns (0 .. 2)"});
  CsvOptions wide = file("p0,p1,p2,p3,p4,p5,p6,p7,p8,p9,p10,p11,y\n0,0,0,0,0,0,0,0,0,0,0,0,0\n");
  wide.label_column = "x";
  expect_csv_error(wide, {"13 columns: 'p0', 'p1'", "'p9', ... (3 more)"});
  CsvOptions twice = file("a,y,y\n1,2,0\n");
  twice.label_column = "y";
  expect_csv_error(twice, {"label_column 'y' names columns 1 and 2"});
  CsvOptions unnamed = file("1,2,0\n");
  unnamed.label_column = "label";
  expect_csv_error(unnamed, {"label_column 'label' names a column", "no header row"});
}

TEST_F(CsvDatasetTest, ShapeAndOptionErrors) {
  CsvOptions o = file("a,b,c,y\n1,2,3,0\n");
  o.shape = {2, 2};
  expect_csv_error(o, {"shape [2, 2] holds 4 values", "has 3 features"});
  o.shape = {3, 0};
  expect_csv_error(o, {"shape [3, 0]"});
  o.shape = {};
  o.standardize.std = 0;
  expect_csv_error(o, {"std > 0"});
  o.standardize.std = 1;
  o.delimiter = '.';
  expect_csv_error(o, {"delimiter '.'"});
}

// A file rewritten in place after the pass is reported, not parsed into wrong labels.
TEST_F(CsvDatasetTest, AFileChangedUnderneathIsAnIoError) {
  CsvOptions o = file("a,y\n1,0\n2,1\n");
  CsvDataset d(o);
  file("a,y\n1,1\n2,1\n");
  expect_error<IoError>([&] { batch(d, {0}); }, {"data.csv:2:", "changed"});
  file("a,y\n1,0\n");
  expect_error<IoError>([&] { batch(d, {1}); }, {"data.csv:3:", "changed"});
}

}  // namespace
}  // namespace cohort::data
