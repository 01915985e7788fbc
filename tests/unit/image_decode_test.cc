// image_decode.h: PNGs of every colour type and bit depth decoded exactly, JPEGs within their
// loss, channel conversion as PIL's, bilinear resizing against values worked out by hand (and
// equal to torch.nn.functional.interpolate(mode="bilinear", align_corners=False)), and every
// broken file an exception naming it.
#include "cohort/data/image_decode.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cohort/core/error.h"
#include "tests/support/files.h"
#include "tests/support/image_files.h"
#include "tests/unit/data_test_util.h"

namespace cohort::data {
namespace {

namespace fs = std::filesystem;
using testing::PngSpec;
using Bytes = std::vector<uint8_t>;
using Floats = std::vector<float>;

class ImageDecodeTest : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return tmp_.file(name); }
  testing::TempDir tmp_;
};

void expect_image(const DecodedImage& img, int64_t w, int64_t h, int channels, const Bytes& px) {
  EXPECT_EQ(img.width, w);
  EXPECT_EQ(img.height, h);
  EXPECT_EQ(img.channels, channels);
  EXPECT_EQ(img.pixels, px);
}

TEST_F(ImageDecodeTest, Png8BitOfEachColourTypeIsExact) {
  const Bytes rgb = {10, 200, 30, 255, 0, 0, 0, 255, 0, 1, 2, 3, 250, 251, 252, 7, 8, 9};
  testing::write_png8(file("rgb.png"), 3, 2, 3, rgb);
  expect_image(read_image(file("rgb.png")), 3, 2, 3, rgb);
  const Bytes gray = {0, 1, 127, 128, 254, 255};
  testing::write_png8(file("gray.png"), 2, 3, 1, gray);
  expect_image(read_image(file("gray.png")), 2, 3, 1, gray);
  const Bytes ga = {9, 0, 99, 128, 199, 255};
  testing::write_png8(file("ga.png"), 3, 1, 2, ga);
  expect_image(read_image(file("ga.png")), 3, 1, 2, ga);
  const Bytes rgba = {1, 2, 3, 4, 250, 251, 252, 253};
  testing::write_png8(file("rgba.png"), 1, 2, 4, rgba);
  expect_image(read_image(file("rgba.png")), 1, 2, 4, rgba);
}

TEST_F(ImageDecodeTest, PaletteBecomesRgbAndItsTransparencyAlpha) {
  PngSpec s{2, 2, PNG_COLOR_TYPE_PALETTE, 8, {0, 1, 2, 1}};
  s.palette = {{255, 0, 0}, {0, 128, 255}, {7, 8, 9}};
  testing::write_png(file("pal.png"), s);
  expect_image(read_image(file("pal.png")), 2, 2, 3,
               {255, 0, 0, 0, 128, 255, 7, 8, 9, 0, 128, 255});
  s.trns = {0, 200};  // entries past the list are opaque
  testing::write_png(file("pal_t.png"), s);
  expect_image(read_image(file("pal_t.png")), 2, 2, 4,
               {255, 0, 0, 0, 0, 128, 255, 200, 7, 8, 9, 255, 0, 128, 255, 200});
  PngSpec low{4, 1, PNG_COLOR_TYPE_PALETTE, 2, {0b00011011}};  // 2-bit indices 0, 1, 2, 3
  low.palette = {{1, 1, 1}, {2, 2, 2}, {3, 3, 3}, {4, 4, 4}};
  testing::write_png(file("pal2.png"), low);
  expect_image(read_image(file("pal2.png")), 4, 1, 3, {1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4});
}

TEST_F(ImageDecodeTest, SixteenBitKeepsTheHighByteAndLowBitGrayScalesTo255) {
  // Big-endian samples: 0x1234, 0xffff, 0x0101, then 0x00ff, 0x8000, 0x7fff.
  testing::write_png(file("rgb16.png"),
                     {1,
                      2,
                      PNG_COLOR_TYPE_RGB,
                      16,
                      {0x12, 0x34, 0xff, 0xff, 0x01, 0x01, 0x00, 0xff, 0x80, 0x00, 0x7f, 0xff}});
  expect_image(read_image(file("rgb16.png")), 1, 2, 3, {0x12, 0xff, 0x01, 0x00, 0x80, 0x7f});
  testing::write_png(file("g16.png"), {2, 1, PNG_COLOR_TYPE_GRAY, 16, {0xab, 0xcd, 0x00, 0x01}});
  expect_image(read_image(file("g16.png")), 2, 1, 1, {0xab, 0x00});
  testing::write_png(file("g1.png"), {8, 1, PNG_COLOR_TYPE_GRAY, 1, {0b10110001}});
  expect_image(read_image(file("g1.png")), 8, 1, 1, {255, 0, 255, 255, 0, 0, 0, 255});
  testing::write_png(file("g4.png"), {2, 1, PNG_COLOR_TYPE_GRAY, 4, {0x3f}});
  expect_image(read_image(file("g4.png")), 2, 1, 1, {0x33, 0xff});  // 4 bits n -> n * 17
}

TEST_F(ImageDecodeTest, InterlacedPngDecodesTheSame) {
  Bytes px;
  for (int i = 0; i < 9 * 7 * 3; ++i) px.push_back(uint8_t(i * 7));
  testing::write_png(file("adam7.png"), {9, 7, PNG_COLOR_TYPE_RGB, 8, px, {}, {}, true});
  expect_image(read_image(file("adam7.png")), 9, 7, 3, px);
}

TEST_F(ImageDecodeTest, JpegWithinItsLoss) {
  Bytes rgb, gray;
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 16; ++x) {
      rgb.insert(rgb.end(), {uint8_t(x * 16), uint8_t(y * 16), uint8_t(128)});
      gray.push_back(uint8_t((x + y) * 8));
    }
  }
  testing::write_jpeg(file("rgb.jpg"), 16, 16, 3, rgb);
  testing::write_jpeg(file("gray.jpeg"), 16, 16, 1, gray);
  for (auto [name, want, channels] : {std::tuple{"rgb.jpg", &rgb, 3}, {"gray.jpeg", &gray, 1}}) {
    const DecodedImage img = read_image(file(name));
    ASSERT_EQ(img.channels, channels) << name;
    ASSERT_EQ(img.width, 16);
    ASSERT_EQ(img.height, 16);
    for (size_t i = 0; i < want->size(); ++i) {
      ASSERT_NEAR(img.pixels[i], (*want)[i], 4) << name << " byte " << i;
    }
  }
}

TEST_F(ImageDecodeTest, CmykJpegBecomesRgbAsPilConvertsIt) {
  // Stored inverted (Adobe): 255 is no ink. White, cyan, black, 50% gray through K.
  Bytes img = testing::solid(8, 8, {255, 255, 255, 255});
  for (size_t i = 0; i < img.size(); i += 4) {
    const size_t px = i / 4;
    if (px % 4 == 1) img[i] = 0;        // full cyan ink
    if (px % 4 == 2) img[i + 3] = 0;    // full black ink
    if (px % 4 == 3) img[i + 3] = 127;  // half black ink
  }
  testing::write_jpeg(file("cmyk.jpg"), 8, 8, 4, img);
  const DecodedImage d = read_image(file("cmyk.jpg"));
  ASSERT_EQ(d.channels, 3);
  const Bytes want[4] = {{255, 255, 255}, {0, 255, 255}, {0, 0, 0}, {127, 127, 127}};
  for (size_t px = 0; px < 64; ++px) {
    for (size_t c = 0; c < 3; ++c) {
      EXPECT_NEAR(d.pixels[px * 3 + c], want[px % 4][c], 6) << "pixel " << px << " channel " << c;
    }
  }
}

TEST_F(ImageDecodeTest, TheFormatComesFromTheBytesNotTheName) {
  testing::write_jpeg(file("really_a_jpeg.png"), 8, 8, 1, testing::solid(8, 8, {77}));
  const DecodedImage d = read_image(file("really_a_jpeg.png"));
  EXPECT_EQ(d.channels, 1);
  EXPECT_NEAR(d.pixels[0], 77, 2);
  testing::write_png8(file("png.jpg"), 1, 1, 3, {1, 2, 3});
  expect_image(read_image(file("png.jpg")), 1, 1, 3, {1, 2, 3});
  const Bytes head = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  EXPECT_EQ(image_format(head), ImageFormat::kPng);
  EXPECT_EQ(image_format(Bytes{0xff, 0xd8, 0xff, 0xe0}), ImageFormat::kJpeg);
  EXPECT_EQ(image_format(Bytes{0xff, 0xd8}), ImageFormat::kUnknown);
}

TEST_F(ImageDecodeTest, BrokenFilesAreErrorsNamingThem) {
  testing::write_png8(file("whole.png"), 16, 16, 3, testing::solid(16, 16, {1, 2, 3}));
  const std::string png = testing::read_bytes(file("whole.png"));
  testing::write_bytes(file("cut.png"), png.substr(0, png.size() / 2));
  expect_error<IoError>([&] { read_image(file("cut.png")); },
                        {file("cut.png"), "PNG image is cut short"});
  std::string bad_crc = png;
  bad_crc[29] ^= 0x55;  // inside IHDR's CRC (8 signature + 4 length + 4 type + 13 data)
  testing::write_bytes(file("crc.png"), bad_crc);
  expect_error<InvalidArgument>([&] { read_image(file("crc.png")); },
                                {file("crc.png"), "cannot decode the PNG image", "CRC"});
  testing::write_bytes(file("notes.png"), "hello, not an image\n");
  expect_error<InvalidArgument>(
      [&] { read_image(file("notes.png")); },
      {file("notes.png"), "not a PNG or JPEG image", "a file starting with \"hello, n\""});
  testing::write_bytes(file("anim.png"), "GIF89a\x01\x00\x01\x00");
  expect_error<InvalidArgument>([&] { read_image(file("anim.png")); }, {"a GIF image"});
  testing::write_bytes(file("empty.jpg"), "");
  expect_error<InvalidArgument>([&] { read_image(file("empty.jpg")); },
                                {file("empty.jpg"), "the file is empty"});
  expect_error<IoError>([&] { read_image(file("missing.png")); },
                        {file("missing.png"), "cannot open", "No such file"});
  fs::create_directory(file("dir.png"));
  expect_error<IoError>([&] { read_image(file("dir.png")); },
                        {file("dir.png"), "not a regular file"});
}

TEST_F(ImageDecodeTest, BrokenJpegsAreErrorsNamingThem) {
  Bytes px;
  for (int i = 0; i < 32 * 32 * 3; ++i) px.push_back(uint8_t(i * 13));
  testing::write_jpeg(file("whole.jpg"), 32, 32, 3, px);
  const std::string jpg = testing::read_bytes(file("whole.jpg"));
  testing::write_bytes(file("cut.jpg"), jpg.substr(0, jpg.size() / 2));
  expect_error<IoError>([&] { read_image(file("cut.jpg")); },
                        {file("cut.jpg"), "JPEG image is cut short", "Premature end"});
  testing::write_bytes(file("head.jpg"), jpg.substr(0, 40));
  expect_error<IoError>([&] { read_image(file("head.jpg")); }, {file("head.jpg"), "cut short"});
  std::string garbage = jpg.substr(0, 4) + std::string(200, '\x17');
  testing::write_bytes(file("garbage.jpg"), garbage);
  expect_error<Error>([&] { read_image(file("garbage.jpg")); }, {file("garbage.jpg"), "JPEG"});
  // Only the end marker missing: PIL refuses it too ("image file is truncated").
  testing::write_bytes(file("no_eoi.jpg"), jpg.substr(0, jpg.size() - 2));
  expect_error<IoError>([&] { read_image(file("no_eoi.jpg")); }, {file("no_eoi.jpg"), "cut short"});
}

TEST(ImageChannels, ConversionsAsPil) {
  const DecodedImage rgb{4, 1, 3, {10, 200, 30, 255, 0, 0, 0, 255, 0, 0, 0, 255}};
  // PIL: Image.fromarray(rgb).convert("L") gives 124, 76, 150, 29.
  EXPECT_EQ(convert_channels(rgb, 1).pixels, Bytes({124, 76, 150, 29}));
  EXPECT_EQ(convert_channels(rgb, 4).pixels,
            Bytes({10, 200, 30, 255, 255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 255, 255}));
  EXPECT_EQ(convert_channels(rgb, 2).pixels, Bytes({124, 255, 76, 255, 150, 255, 29, 255}));
  const DecodedImage gray{2, 1, 1, {5, 250}};
  EXPECT_EQ(convert_channels(gray, 3).pixels, Bytes({5, 5, 5, 250, 250, 250}));
  EXPECT_EQ(convert_channels(gray, 2).pixels, Bytes({5, 255, 250, 255}));
  const DecodedImage ga{2, 1, 2, {5, 9, 250, 0}};
  EXPECT_EQ(convert_channels(ga, 1).pixels, Bytes({5, 250}));
  EXPECT_EQ(convert_channels(ga, 4).pixels, Bytes({5, 5, 5, 9, 250, 250, 250, 0}));
  const DecodedImage rgba{1, 1, 4, {255, 0, 0, 17}};
  EXPECT_EQ(convert_channels(rgba, 3).pixels, Bytes({255, 0, 0}));
  EXPECT_EQ(convert_channels(rgba, 1).pixels, Bytes({76}));  // alpha ignored, as PIL does
  EXPECT_EQ(convert_channels(rgba, 2).pixels, Bytes({76, 17}));
  EXPECT_EQ(convert_channels(rgb, 3).pixels, rgb.pixels);
  expect_error<InvalidArgument>([&] { convert_channels(rgb, 5); }, {"5 channels"});
}

Floats chw(const DecodedImage& img, int64_t h, int64_t w) {
  Floats out(size_t(img.channels * h * w), -1.0f);
  image_to_chw(img, h, w, out.data());
  return out;
}

void expect_floats(const Floats& got, const Floats& bytes_times_255) {
  ASSERT_EQ(got.size(), bytes_times_255.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], bytes_times_255[i] / 255.0f, 1e-6) << "value " << i;
  }
}

TEST(ImageResize, SameSizeIsBytesOver255InChwOrder) {
  const DecodedImage rgb{2, 1, 3, {10, 20, 30, 40, 50, 60}};
  EXPECT_EQ(chw(rgb, 1, 2),
            Floats({10 / 255.0f, 40 / 255.0f, 20 / 255.0f, 50 / 255.0f, 30 / 255.0f, 60 / 255.0f}));
}

// Half-pixel centres: output pixel o samples input position (o + 0.5) * in / out - 0.5, clamped
// at the edges. 2 -> 4: positions 0 (clamped), 0.25, 0.75, 1.25 (clamped to 1).
TEST(ImageResize, TwoByTwoToFourByFour) {
  const DecodedImage img{2, 2, 1, {0, 100, 200, 40}};
  expect_floats(chw(img, 4, 4), {0, 25, 75, 100,          //
                                 50, 58.75, 76.25, 85,    // 0.75 row 0 + 0.25 row 1
                                 150, 126.25, 78.75, 55,  // 0.25 row 0 + 0.75 row 1
                                 200, 160, 80, 40});
}

// 4 -> 2: positions 0.5 and 2.5, so each output pixel is the mean of a 2x2 block.
TEST(ImageResize, FourByFourToTwoByTwo) {
  DecodedImage img{4, 4, 1, {}};
  for (int i = 0; i < 16; ++i) img.pixels.push_back(uint8_t(i * 10));
  expect_floats(chw(img, 2, 2), {25, 45, 105, 125});
}

TEST(ImageResize, NonSquareAndEveryChannel) {
  // 2 rows x 3 columns -> 3 x 2: columns sample 0.25 and 1.75, rows 0, 0.5 and 1 (clamped).
  const DecodedImage img{3, 2, 2, {0, 1, 60, 1, 120, 1, 30, 1, 90, 1, 255, 1}};
  expect_floats(chw(img, 3, 2), {15, 105, 30, 159.375, 45, 213.75,  // channel 0
                                 1, 1, 1, 1, 1, 1});                // channel 1: constant
  const DecodedImage dot{1, 1, 1, {51}};
  expect_floats(chw(dot, 3, 2), {51, 51, 51, 51, 51, 51});
}

}  // namespace
}  // namespace cohort::data
