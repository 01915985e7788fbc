#pragma once
// PNG and JPEG files written with libpng and libjpeg, for the tests of the image folder data set
// (tests/unit/image_folder_test.cc, tests/e2e/image_folder_train_test.cc): each test writes
// exactly the pixels, colour type and bit depth it checks. Throws std::runtime_error when a file
// cannot be written.
#include <csetjmp>
#include <cstdint>
#include <cstdio>  // before jpeglib.h, which uses FILE without including it
#include <stdexcept>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <png.h>

namespace cohort::testing {

struct PngSpec {
  int width = 0;
  int height = 0;
  int color_type = PNG_COLOR_TYPE_RGB;  // PNG_COLOR_TYPE_GRAY, _GRAY_ALPHA, _RGB, _RGBA, _PALETTE
  int bit_depth = 8;                    // 1, 2, 4, 8 or 16
  // The rows as the file stores them: packed below 8 bits, big-endian at 16.
  std::vector<uint8_t> rows;
  std::vector<png_color> palette = {};  // PNG_COLOR_TYPE_PALETTE
  std::vector<uint8_t> trns = {};       // a palette's alpha per entry
  bool interlaced = false;
};

inline void write_png(const std::string& path, const PngSpec& s) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("write_png: cannot open " + path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
    throw std::runtime_error("write_png: libpng failed on " + path);
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, png_uint_32(s.width), png_uint_32(s.height), s.bit_depth, s.color_type,
               s.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!s.palette.empty()) png_set_PLTE(png, info, s.palette.data(), int(s.palette.size()));
  if (!s.trns.empty()) png_set_tRNS(png, info, s.trns.data(), int(s.trns.size()), nullptr);
  png_write_info(png, info);
  const size_t stride = s.rows.size() / size_t(s.height);
  std::vector<png_bytep> rows(size_t(s.height));
  for (int y = 0; y < s.height; ++y) {
    rows[size_t(y)] = const_cast<png_bytep>(s.rows.data() + size_t(y) * stride);
  }
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

// An 8-bit PNG of `channels` (1 gray, 2 gray + alpha, 3 RGB, 4 RGBA) from HWC bytes.
inline void write_png8(const std::string& path, int width, int height, int channels,
                       const std::vector<uint8_t>& hwc) {
  static constexpr int kTypes[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                   PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
  write_png(path, {width, height, kTypes[channels - 1], 8, hwc});
}

// A JPEG of `components` (1 gray, 3 RGB, 4 CMYK as given) from HWC bytes.
inline void write_jpeg(const std::string& path, int width, int height, int components,
                       const std::vector<uint8_t>& hwc, int quality = 100) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("write_jpeg: cannot open " + path);
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);  // the default error_exit: a test's bad JPEG call ends the test
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = JDIMENSION(width);
  c.image_height = JDIMENSION(height);
  c.input_components = components;
  c.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  // No chroma subsampling (4:4:4): a pixel's colour stays its own, so tests can compare pixels.
  for (int i = 0; i < c.num_components; ++i) {
    c.comp_info[i].h_samp_factor = 1;
    c.comp_info[i].v_samp_factor = 1;
  }
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row =
        const_cast<JSAMPROW>(hwc.data() + size_t(c.next_scanline) * size_t(width * components));
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

// width x height pixels of one colour (`channels` bytes), HWC.
inline std::vector<uint8_t> solid(int width, int height, std::vector<uint8_t> colour) {
  std::vector<uint8_t> out;
  for (int i = 0; i < width * height; ++i) out.insert(out.end(), colour.begin(), colour.end());
  return out;
}

}  // namespace cohort::testing
