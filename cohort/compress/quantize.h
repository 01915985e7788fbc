#pragma once
// Quantizing compressors (compressor.h), both combined by gathering every rank's message:
//   signsgd: EF-signSGD (Karimireddy et al. 2019): scale * mean|x| and one sign bit per value;
//            with error feedback what the signs did not carry is kept for the next step.
//            Message: f32 magnitude, then ceil(n / 8) bytes of sign bits (1: negative).
//   qsgd:    QSGD (Alistarh et al. 2017) with s levels, in chunks of kQsgdChunk values as the
//            paper's bucketing (one norm per chunk keeps the variance bounded for large
//            vectors): |x_i| / |chunk|_2 * s rounded stochastically to a neighbouring integer
//            level (unbiased: E[decoded] = x), sent as a signed byte. Message: per chunk, its
//            f32 norm (times scale) and its int8 levels (s <= 127). The rounding draws are
//            counter-based from (seed, round, index).
#include "cohort/compress/compressor.h"

namespace cohort::compress {

class SignCompressor : public Compressor {
 public:
  Method method() const override { return Method::kSign; }
  Combine combine() const override { return Combine::kGather; }
  DType wire_dtype() const override { return DType::u8; }
  size_t message_bytes(size_t numel) const override { return 4 + (numel + 7) / 8; }
  void decode_add(std::span<const uint8_t> message, const CodecContext& ctx,
                  std::span<float> out) const override;

 protected:
  void encode_values(std::span<const float> in, std::span<uint8_t> message, const CodecContext& ctx,
                     std::span<float> unsent) override;
};

inline constexpr size_t kQsgdChunk = 512;

class QsgdCompressor : public Compressor {
 public:
  QsgdCompressor(int levels, uint64_t seed);  // InvalidArgument unless 1 <= levels <= 127
  Method method() const override { return Method::kQsgd; }
  Combine combine() const override { return Combine::kGather; }
  DType wire_dtype() const override { return DType::u8; }
  size_t message_bytes(size_t numel) const override {
    return numel + 4 * ((numel + kQsgdChunk - 1) / kQsgdChunk);
  }
  void decode_add(std::span<const uint8_t> message, const CodecContext& ctx,
                  std::span<float> out) const override;

 protected:
  void encode_values(std::span<const float> in, std::span<uint8_t> message, const CodecContext& ctx,
                     std::span<float> unsent) override;

 private:
  int levels_;
  uint64_t seed_;
};

}  // namespace cohort::compress
