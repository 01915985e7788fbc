// Method names, the error-feedback residual, and the encode step every compressor shares.
#include "cohort/compress/compressor.h"

#include "cohort/compress/codecs.h"
#include "cohort/compress/quantize.h"
#include "cohort/core/error.h"

namespace cohort::compress {

namespace {
constexpr const char* kNames[] = {"none", "fp16", "bf16", "topk", "randomk", "signsgd", "qsgd"};
}

const char* method_name(Method m) {
  auto i = size_t(m);
  COHORT_CHECK_ARG(i < std::size(kNames), "compress: unknown method value ", i);
  return kNames[i];
}

std::vector<std::string> method_names() {
  return {std::begin(kNames), std::end(kNames)};
}

Method parse_method(const std::string& name, const std::string& key) {
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (name == kNames[i]) return Method(i);
  }
  throw InvalidArgument(detail::str(key, " = \"", name,
                                    "\" is not a compression method; choose one of none, fp16, "
                                    "bf16, topk, randomk, signsgd, qsgd"));
}

void Residual::accumulate(std::span<const float> grad) {
  if (values_.empty()) values_.assign(grad.size(), 0.0f);
  COHORT_CHECK_ARG(values_.size() == grad.size(), "error feedback: the residual holds ",
                   values_.size(), " values but the gradient has ", grad.size(),
                   " (a stream's vectors must keep their size)");
  for (size_t i = 0; i < grad.size(); ++i) values_[i] += grad[i];
}

void Compressor::encode(std::span<const float> grad, std::span<uint8_t> message,
                        const CodecContext& ctx, Residual* residual) {
  check_message(message.size(), grad.size(), "encode");
  if (residual == nullptr) {
    encode_values(grad, message, ctx, {});
    return;
  }
  residual->accumulate(grad);
  encode_values(residual->values(), message, ctx, residual->values());
}

void Compressor::check_message(size_t bytes, size_t numel, const char* what) const {
  COHORT_CHECK_ARG(bytes == message_bytes(numel), "compress ", method_name(method()), " ", what,
                   ": message of ", bytes, " bytes, expected ", message_bytes(numel), " for ",
                   numel, " values");
}

std::unique_ptr<Compressor> make_compressor(const CompressorOptions& o) {
  switch (o.method) {
    case Method::kFp16:
      return std::make_unique<CastCompressor>(DType::f16);
    case Method::kBf16:
      return std::make_unique<CastCompressor>(DType::bf16);
    case Method::kTopK:
      return std::make_unique<TopKCompressor>(o.ratio);
    case Method::kRandomK:
      return std::make_unique<RandomKCompressor>(o.ratio, o.seed);
    case Method::kSign:
      return std::make_unique<SignCompressor>();
    case Method::kQsgd:
      return std::make_unique<QsgdCompressor>(o.levels, o.seed);
    case Method::kNone:
      break;
  }
  throw InvalidArgument(detail::str("make_compressor: method '", method_name(o.method),
                                    "' has no compressor (it sends gradients as they are)"));
}

}  // namespace cohort::compress
