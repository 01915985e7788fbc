#include "cohort/data/image_decode.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>  // before jpeglib.h, which uses FILE and size_t without including them
#include <cstring>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include "cohort/core/error.h"

namespace cohort::data {
namespace {

// libpng and libjpeg report errors by longjmp to a setjmp of ours. A longjmp must not cross a
// frame that holds a C++ object with a destructor, so each decoder is split in two: *_run holds
// the setjmp and only plain locals, and writes into an object its caller owns (and frees).

// ---- PNG ------------------------------------------------------------------------------------

struct PngdecState {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  bool truncated = false;  // the file ended early: an IoError, not a corrupt file
  char message[256] = {};
  DecodedImage image;
  std::vector<png_bytep> rows;
};

void pngdec_read_bytes(png_structp png, png_bytep out, size_t n) {
  auto* s = static_cast<PngdecState*>(png_get_io_ptr(png));
  if (n > s->bytes.size() - s->pos) {
    s->truncated = true;
    png_error(png, "the file ends before the image does (truncated?)");
  }
  std::memcpy(out, s->bytes.data() + s->pos, n);
  s->pos += n;
}

void pngdec_on_error(png_structp png, png_const_charp message) {
  auto* s = static_cast<PngdecState*>(png_get_error_ptr(png));
  std::snprintf(s->message, sizeof s->message, "%s", message);
  png_longjmp(png, 1);
}

// Warnings (a bad CRC in an ancillary chunk, an unknown sRGB profile) leave a usable image, and
// PIL ignores them too; printing one line per image per epoch would drown the log.
void pngdec_on_warning(png_structp, png_const_charp) {}

// Asks libpng for 8-bit gray, gray + alpha, RGB or RGBA, whatever the file stores.
void pngdec_set_transforms(png_structp png, png_infop info) {
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  if (depth == 16) png_set_strip_16(png);  // the high byte, as PIL reads 16-bit RGB
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
}

// False on a libpng error, with s.message set.
bool pngdec_run(png_structp png, png_infop info, PngdecState& s) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, &s, pngdec_read_bytes);
  png_read_info(png, info);
  const int64_t w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  if (w * h > kMaxImagePixels) {
    std::snprintf(s.message, sizeof s.message, "%lld x %lld pixels, more than the %lld allowed",
                  (long long)w, (long long)h, (long long)kMaxImagePixels);
    return false;
  }
  pngdec_set_transforms(png, info);
  DecodedImage& img = s.image;
  img.width = w;
  img.height = h;
  img.channels = png_get_channels(png, info);
  img.pixels.resize(size_t(w * h * img.channels));
  s.rows.resize(size_t(h));
  for (int64_t y = 0; y < h; ++y) s.rows[size_t(y)] = &img.pixels[size_t(y * w * img.channels)];
  png_read_image(png, s.rows.data());
  png_read_end(png, nullptr);
  return true;
}

DecodedImage pngdec_decode(std::span<const uint8_t> bytes, const std::string& where) {
  PngdecState s;
  s.bytes = bytes;
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, pngdec_on_error, pngdec_on_warning);
  COHORT_CHECK_IO(png != nullptr, where, ": libpng could not allocate its state");
  png_infop info = png_create_info_struct(png);
  const bool have_info = info != nullptr;
  const bool ok = have_info && pngdec_run(png, info, s);
  png_destroy_read_struct(&png, have_info ? &info : nullptr, nullptr);  // nulls both pointers
  COHORT_CHECK_IO(have_info, where, ": libpng could not allocate its state");
  COHORT_CHECK_IO(ok || !s.truncated, where, ": PNG image is cut short: ", s.message);
  COHORT_CHECK_ARG(ok, where, ": cannot decode the PNG image: ", s.message);
  return std::move(s.image);
}

// ---- JPEG -----------------------------------------------------------------------------------

struct JpegdecError {
  jpeg_error_mgr mgr;  // first: libjpeg hands back its address as cinfo->err
  std::jmp_buf jmp;
  bool truncated;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpegdec_on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegdecError*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jmp, 1);
}

// libjpeg only warns when the data ends early (it pads the image with gray); a cut file must
// not train as a half-gray image, so that warning is an error, even when only the end marker
// is missing (PIL: "image file is truncated"). Other warnings (extraneous bytes before a
// marker) leave a usable image and are ignored, as PIL does.
void jpegdec_on_message(j_common_ptr c, int level) {
  auto* e = reinterpret_cast<JpegdecError*>(c->err);
  if (level == -1 && c->err->msg_code == JWRN_JPEG_EOF) {
    e->truncated = true;
    jpegdec_on_error(c);
  }
}

// False on a libjpeg error, with err.message set. cinfo is zeroed by the caller, who destroys it.
bool jpegdec_run(jpeg_decompress_struct& cinfo, JpegdecError& err, std::span<const uint8_t> bytes,
                 DecodedImage& img) {
  if (setjmp(err.jmp)) return false;
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  const J_COLOR_SPACE in = cinfo.jpeg_color_space;
  cinfo.out_color_space = in == JCS_GRAYSCALE                ? JCS_GRAYSCALE
                          : in == JCS_CMYK || in == JCS_YCCK ? JCS_CMYK
                                                             : JCS_RGB;
  const int64_t w = cinfo.image_width, h = cinfo.image_height;
  if (w * h > kMaxImagePixels) {
    std::snprintf(err.message, sizeof err.message, "%lld x %lld pixels, more than the %lld allowed",
                  (long long)w, (long long)h, (long long)kMaxImagePixels);
    return false;
  }
  jpeg_start_decompress(&cinfo);
  img.width = cinfo.output_width;
  img.height = cinfo.output_height;
  img.channels = cinfo.output_components;
  const size_t stride = size_t(img.width) * size_t(img.channels);
  img.pixels.resize(stride * size_t(img.height));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = &img.pixels[cinfo.output_scanline * stride];
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  return true;
}

int jpegdec_muldiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

// CMYK to RGB as PIL converts a CMYK JPEG: the samples are stored inverted (Adobe's
// convention, which PIL assumes for every CMYK JPEG), then R = (255 - K) - C (255 - K) / 255.
DecodedImage jpegdec_cmyk_to_rgb(const DecodedImage& cmyk) {
  DecodedImage rgb{cmyk.width, cmyk.height, 3, std::vector<uint8_t>(cmyk.pixels.size() / 4 * 3)};
  const uint8_t* p = cmyk.pixels.data();
  uint8_t* q = rgb.pixels.data();
  for (size_t i = 0; i < cmyk.pixels.size() / 4; ++i, p += 4, q += 3) {
    const int nk = p[3];  // 255 - K, K being 255 - the stored sample
    for (int c = 0; c < 3; ++c) q[c] = uint8_t(nk - jpegdec_muldiv255(255 - p[c], nk));
  }
  return rgb;
}

DecodedImage jpegdec_decode(std::span<const uint8_t> bytes, const std::string& where) {
  jpeg_decompress_struct cinfo{};
  JpegdecError err{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpegdec_on_error;
  err.mgr.emit_message = jpegdec_on_message;
  DecodedImage img;
  const bool ok = jpegdec_run(cinfo, err, bytes, img);
  jpeg_destroy_decompress(&cinfo);
  COHORT_CHECK_IO(ok || !err.truncated, where, ": JPEG image is cut short: ", err.message);
  COHORT_CHECK_ARG(ok, where, ": cannot decode the JPEG image: ", err.message);
  return img.channels == 4 ? jpegdec_cmyk_to_rgb(img) : img;
}

// ---- reading and naming ---------------------------------------------------------------------

std::vector<uint8_t> imgdec_read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  COHORT_CHECK_IO(fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  std::vector<uint8_t> out(regular ? size_t(st.st_size) : 0);
  size_t got = 0;
  int read_errno = 0;
  while (regular && got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) read_errno = errno;
    if (n <= 0) break;
    got += size_t(n);
  }
  ::close(fd);
  COHORT_CHECK_IO(regular, path, ": not a regular file");
  COHORT_CHECK_IO(got == out.size(), path, ": read ", got, " of ", out.size(), " bytes: ",
                  read_errno ? std::strerror(read_errno) : "the file shrank while being read");
  return out;
}

// What a file that is neither PNG nor JPEG starts with: a format's name where it is a known
// one, else its first bytes (\xNN for the non-printing ones).
std::string imgdec_describe(std::span<const uint8_t> b) {
  struct Magic {
    const char* bytes;
    size_t size;
    const char* name;
  };
  static constexpr Magic kOthers[] = {
      {"GIF8", 4, "a GIF image"},       {"BM", 2, "a BMP image"},
      {"II*\0", 4, "a TIFF image"},     {"MM\0*", 4, "a TIFF image"},
      {"\x93NUMPY", 6, "a .npy array"}, {"PK\x03\x04", 4, "a zip file"}};
  for (const Magic& m : kOthers) {
    if (b.size() >= m.size && std::memcmp(b.data(), m.bytes, m.size) == 0) return m.name;
  }
  if (b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 &&
      std::memcmp(b.data() + 8, "WEBP", 4) == 0) {
    return "a WebP image";
  }
  std::string s = "a file starting with \"";
  for (uint8_t c : b.first(std::min<size_t>(b.size(), 8))) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    s += (c >= 0x20 && c < 0x7f) ? std::string(1, char(c)) : buf;
  }
  return s + "\"";
}

// ---- channels and size ----------------------------------------------------------------------

// ITU-R 601-2 luma in 16-bit fixed point, rounded: PIL's convert("L"), bit for bit.
uint8_t imgdec_luma(const uint8_t* rgb) {
  return uint8_t((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

// One output pixel of `to` channels from one input pixel of `from` channels.
void imgdec_convert_pixel(const uint8_t* p, int from, uint8_t* q, int to) {
  const bool color = from >= 3;
  const uint8_t alpha = from == 2 ? p[1] : from == 4 ? p[3] : 255;
  if (to <= 2) {
    q[0] = color ? imgdec_luma(p) : p[0];
  } else {
    for (int c = 0; c < 3; ++c) q[c] = color ? p[c] : p[0];
  }
  if (to == 2 || to == 4) q[to - 1] = alpha;
}

// Where output row or column `o` of `out` samples from, with half-pixel centres: the source
// position (o + 0.5) * in / out - 0.5, clamped at 0, between samples i0 and i1 with weight w1
// on i1. torch's upsample_bilinear2d (align_corners=False) in float, as it computes it.
struct ImgdecTap {
  int64_t i0, i1;
  float w1;
};

std::vector<ImgdecTap> imgdec_resize_taps(int64_t in, int64_t out) {
  const float scale = float(in) / float(out);
  std::vector<ImgdecTap> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const float src = std::max(scale * (float(o) + 0.5f) - 0.5f, 0.0f);
    const int64_t i0 = std::min(int64_t(src), in - 1);
    taps[size_t(o)] = {i0, i0 < in - 1 ? i0 + 1 : i0, src - float(i0)};
  }
  return taps;
}

void imgdec_resize_bilinear(const DecodedImage& img, int64_t height, int64_t width, float* out) {
  const std::vector<ImgdecTap> ys = imgdec_resize_taps(img.height, height);
  const std::vector<ImgdecTap> xs = imgdec_resize_taps(img.width, width);
  const int64_t ch = img.channels, row = img.width * ch;
  const uint8_t* p = img.pixels.data();
  for (int64_t c = 0; c < ch; ++c) {
    for (const ImgdecTap& y : ys) {
      const uint8_t* r0 = p + y.i0 * row + c;
      const uint8_t* r1 = p + y.i1 * row + c;
      for (const ImgdecTap& x : xs) {
        const float a = (1 - x.w1) * float(r0[x.i0 * ch]) + x.w1 * float(r0[x.i1 * ch]);
        const float b = (1 - x.w1) * float(r1[x.i0 * ch]) + x.w1 * float(r1[x.i1 * ch]);
        *out++ = ((1 - y.w1) * a + y.w1 * b) / 255.0f;
      }
    }
  }
}

}  // namespace

DecodedImage convert_channels(DecodedImage image, int channels) {
  COHORT_CHECK_ARG(channels >= 1 && channels <= 4, "convert_channels: ", channels,
                   " channels; expected 1 (gray), 2 (gray, alpha), 3 (RGB) or 4 (RGBA)");
  COHORT_CHECK_ARG(image.channels >= 1 && image.channels <= 4, "convert_channels: an image of ",
                   image.channels, " channels");
  if (image.channels == channels) return image;  // moved out, not copied
  const size_t n = size_t(image.width * image.height);
  DecodedImage out{image.width, image.height, channels, std::vector<uint8_t>(n * size_t(channels))};
  const uint8_t* p = image.pixels.data();
  uint8_t* q = out.pixels.data();
  for (size_t i = 0; i < n; ++i, p += image.channels, q += channels) {
    imgdec_convert_pixel(p, image.channels, q, channels);
  }
  return out;
}

void image_to_chw(const DecodedImage& image, int64_t height, int64_t width, float* out) {
  COHORT_CHECK_ARG(height > 0 && width > 0, "image_to_chw: size ", height, " x ", width,
                   "; expected positive");
  COHORT_CHECK_ARG(image.width > 0 && image.height > 0 &&
                       image.pixels.size() == size_t(image.width * image.height * image.channels),
                   "image_to_chw: an image of ", image.width, " x ", image.height, " x ",
                   image.channels, " holds ", image.pixels.size(), " bytes");
  if (height != image.height || width != image.width) {
    imgdec_resize_bilinear(image, height, width, out);
    return;
  }
  const int64_t ch = image.channels, plane = height * width;
  for (int64_t c = 0; c < ch; ++c) {
    const uint8_t* p = image.pixels.data() + c;
    float* o = out + c * plane;
    for (int64_t i = 0; i < plane; ++i) o[i] = float(p[i * ch]) / 255.0f;
  }
}

ImageFormat image_format(std::span<const uint8_t> head) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  static constexpr uint8_t kJpeg[3] = {0xff, 0xd8, 0xff};
  if (head.size() >= 8 && std::memcmp(head.data(), kPng, 8) == 0) return ImageFormat::kPng;
  if (head.size() >= 3 && std::memcmp(head.data(), kJpeg, 3) == 0) return ImageFormat::kJpeg;
  return ImageFormat::kUnknown;
}

DecodedImage decode_image(std::span<const uint8_t> bytes, const std::string& where) {
  COHORT_CHECK_ARG(!bytes.empty(), where, ": the file is empty; expected a PNG or JPEG image");
  switch (image_format(bytes)) {
    case ImageFormat::kPng:
      return pngdec_decode(bytes, where);
    case ImageFormat::kJpeg:
      return jpegdec_decode(bytes, where);
    default:
      throw InvalidArgument(detail::str(where,
                                        ": not a PNG or JPEG image: ", imgdec_describe(bytes),
                                        " (the format is read from the bytes, not the name)"));
  }
}

DecodedImage read_image(const std::string& path) {
  const std::vector<uint8_t> bytes = imgdec_read_file(path);
  return decode_image(bytes, path);
}

}  // namespace cohort::data
