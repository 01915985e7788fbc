#pragma once
// The compressors behind make_compressor (compressor.h). Message layouts:
//   fp16, bf16: numel 16-bit values, each scale * x rounded to nearest even; fp16 saturates at
//               +-65504 (a finite message even when a scaled value overflows);
//   topk:       k uint32 indices (ascending), then k float32 values (scale * x);
//   randomk:    k float32 values; the indices follow from (seed, round) (sparse.h).
#include "cohort/compress/compressor.h"

namespace cohort::compress {

class CastCompressor : public Compressor {
 public:
  explicit CastCompressor(DType dtype);  // f16 or bf16
  Method method() const override { return dtype_ == DType::f16 ? Method::kFp16 : Method::kBf16; }
  Combine combine() const override { return Combine::kSum; }
  DType wire_dtype() const override { return dtype_; }
  size_t message_bytes(size_t numel) const override { return 2 * numel; }
  void decode_add(std::span<const uint8_t> message, const CodecContext& ctx,
                  std::span<float> out) const override;

 protected:
  void encode_values(std::span<const float> in, std::span<uint8_t> message, const CodecContext& ctx,
                     std::span<float> unsent) override;

 private:
  uint16_t to_bits(float x) const;
  float from_bits(uint16_t b) const;
  DType dtype_;
};

class TopKCompressor : public Compressor {
 public:
  explicit TopKCompressor(double ratio);
  Method method() const override { return Method::kTopK; }
  Combine combine() const override { return Combine::kGather; }
  DType wire_dtype() const override { return DType::u8; }
  size_t message_bytes(size_t numel) const override;
  void decode_add(std::span<const uint8_t> message, const CodecContext& ctx,
                  std::span<float> out) const override;

 protected:
  void encode_values(std::span<const float> in, std::span<uint8_t> message, const CodecContext& ctx,
                     std::span<float> unsent) override;

 private:
  double ratio_;
};

class RandomKCompressor : public Compressor {
 public:
  RandomKCompressor(double ratio, uint64_t seed);
  Method method() const override { return Method::kRandomK; }
  Combine combine() const override { return Combine::kSum; }
  DType wire_dtype() const override { return DType::f32; }
  size_t message_bytes(size_t numel) const override;
  void decode_add(std::span<const uint8_t> message, const CodecContext& ctx,
                  std::span<float> out) const override;

 protected:
  void encode_values(std::span<const float> in, std::span<uint8_t> message, const CodecContext& ctx,
                     std::span<float> unsent) override;

 private:
  double ratio_;
  uint64_t seed_;
};

}  // namespace cohort::compress
