#pragma once
// PNG and JPEG images decoded to 8-bit pixels (Debian's libpng and libjpeg-turbo), converted to
// a channel count and resized to a height and width as float CHW: what an image folder data
// set (image_folder.h) makes of one file.
//
// Conventions, chosen to match what a PyTorch user gets from PIL and torchvision:
// - The format is found from the file's first bytes, never its extension: a JPEG named .png
//   decodes; a text file named .png is an error naming what it starts with.
// - PNG: every colour type and bit depth. Palette images become RGB (RGBA with a tRNS chunk),
//   gray below 8 bits is scaled to 8, 16-bit samples keep their high byte (as PIL reads 16-bit
//   RGB), a tRNS colour key becomes an alpha channel. Gamma chunks are ignored, as PIL does.
// - JPEG: gray, YCbCr and RGB; CMYK and YCCK (Adobe, stored inverted, as Photoshop writes them
//   and PIL reads them) convert to RGB with PIL's formula. A file that ends before the image
//   does (even by its end marker only) is an error, as in PIL ("image file is truncated");
//   other libjpeg warnings are ignored.
// - Channels (convert_channels): 1 = luminance L = (19595 R + 38470 G + 7471 B + 32768) >> 16,
//   ITU-R 601-2 as PIL's convert("L") computes it, bit for bit; 2 = luminance and alpha;
//   3 = RGB (gray replicated); 4 = RGBA. Alpha is dropped when the target has none, and is
//   255 (opaque) when the source has none.
// - Resize (image_to_chw): bilinear with half-pixel centres and no antialiasing, i.e.
//   torch.nn.functional.interpolate(mode="bilinear", align_corners=False, antialias=False).
//   Upscaling equals PIL's BILINEAR before its rounding to uint8; downscaling differs from PIL,
//   which widens the filter (antialias) when shrinking.
//
// Errors: IoError when the file cannot be read or is cut short; InvalidArgument when it is not
// a PNG or JPEG, is corrupt, or is larger than kMaxImagePixels. Every message starts with the
// file's name. libpng's and libjpeg's own errors come back through setjmp/longjmp and are
// thrown here: nothing prints to stderr or exits. Every function is safe to call from several
// threads at once (no shared state).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cohort::data {

// Height x width x channels bytes, row by row, channels interleaved (HWC).
struct DecodedImage {
  int64_t width = 0;
  int64_t height = 0;
  int channels = 0;  // 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA
  std::vector<uint8_t> pixels;
};

enum class ImageFormat { kUnknown, kPng, kJpeg };

// Guard against decompression bombs: a few hundred bytes of PNG can claim gigapixels. The same
// bound as PIL's DecompressionBombError (2 x Image.MAX_IMAGE_PIXELS).
inline constexpr int64_t kMaxImagePixels = 178956970;

// The format the first bytes announce (the PNG signature, JPEG's FF D8 FF).
ImageFormat image_format(std::span<const uint8_t> head);

// Decodes a PNG or JPEG held in memory; `where` names it in errors (the file's path).
DecodedImage decode_image(std::span<const uint8_t> bytes, const std::string& where);
// Reads the file whole and decodes it.
DecodedImage read_image(const std::string& path);

// The image with `channels` (1 to 4) channels, as described above.
DecodedImage convert_channels(DecodedImage image, int channels);

// Writes the image as float32 [channels, height, width] with values in [0, 1] (byte / 255),
// resized bilinearly when its size differs (see above); `out` holds channels x height x width.
void image_to_chw(const DecodedImage& image, int64_t height, int64_t width, float* out);

}  // namespace cohort::data
