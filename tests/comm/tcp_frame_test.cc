// The TCP transport's frame header decoder (cohort/comm/transport/tcp/frame.h): every header
// round-trips, each way a header can be wrong is reported by name, and no sequence of bytes
// crashes it. The socket-level behaviour (the pair is dropped, the error names the peer) is in
// transport_test.cc.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "cohort/comm/transport/tcp/frame.h"

namespace cohort::comm::transport::tcp {
namespace {

using Bytes = std::array<uint8_t, kFrameHeaderBytes>;

Bytes encode(const FrameHeader& f) {
  Bytes out;
  encode_frame_header(f, out);
  return out;
}

template <typename T>
void put(Bytes& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

FrameHeader sample_data() {
  FrameHeader f;
  f.kind = FrameKind::kData;
  f.length = 123456789;
  f.header.tag = 0x1122334455667788u;
  f.header.info[0] = 1, f.header.info[1] = ~uint64_t{0}, f.header.info[2] = 42;
  return f;
}

TEST(TcpFrame, DataAndAbortHeadersRoundTrip) {
  FrameHeader abort_frame{FrameKind::kAbort, 17, Header{}};
  FrameHeader empty{FrameKind::kData, 0, Header{}};
  for (const FrameHeader& f : {sample_data(), abort_frame, empty}) {
    Bytes b = encode(f);
    FrameDecode d = decode_frame_header(b);
    ASSERT_TRUE(d.ok()) << d.error;
    EXPECT_EQ(d.frame, f);
    EXPECT_EQ(encode(d.frame), b);
  }
}

TEST(TcpFrame, LayoutIsMagicFlagsLengthHeader) {
  // Peers built from other commits must agree on these bytes; pin the layout.
  Bytes b = encode({FrameKind::kAbort, 0x0102030405060708u, Header{9, {10, 11, 12}}});
  uint32_t magic, flags;
  uint64_t length, tag, info2;
  std::memcpy(&magic, b.data(), 4);
  std::memcpy(&flags, b.data() + 4, 4);
  std::memcpy(&length, b.data() + 8, 8);
  std::memcpy(&tag, b.data() + 16, 8);
  std::memcpy(&info2, b.data() + 40, 8);
  EXPECT_EQ(magic, kFrameMagic);
  EXPECT_EQ(flags, kFlagAbort);
  EXPECT_EQ(length, 0x0102030405060708u);
  EXPECT_EQ(tag, 9u);
  EXPECT_EQ(info2, 12u);
}

TEST(TcpFrame, BadMagicIsNamedWithBothValues) {
  Bytes b = encode(sample_data());
  put<uint32_t>(b, 0, 0x54544820u);  // " HTT": an HTTP client on the data port
  FrameDecode d = decode_frame_header(b);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error, "bad frame magic 0x54544820 (expected 0xc0de7c01)");
}

TEST(TcpFrame, UnknownFlagBitsAreRejected) {
  for (uint32_t flags : {2u, 3u, 0x80000000u}) {
    Bytes b = encode(sample_data());
    put<uint32_t>(b, 4, flags);
    FrameDecode d = decode_frame_header(b);
    ASSERT_FALSE(d.ok()) << flags;
    EXPECT_NE(d.error.find("bad frame flags 0x"), std::string::npos) << d.error;
    EXPECT_NE(d.error.find("known: 0x1 abort"), std::string::npos) << d.error;
  }
  Bytes b = encode(sample_data());
  put<uint32_t>(b, 4, 0x6u);
  EXPECT_EQ(decode_frame_header(b).error, "bad frame flags 0x6 (known: 0x1 abort)");
}

TEST(TcpFrame, OversizeLengthsAreRejectedPerKind) {
  FrameLimits limits;
  limits.max_data_bytes = 1000;
  FrameHeader f = sample_data();
  f.length = 1000;
  EXPECT_TRUE(decode_frame_header(encode(f), limits).ok());
  f.length = 1001;
  EXPECT_EQ(decode_frame_header(encode(f), limits).error,
            "data frame length 1001 exceeds the limit of 1000 bytes");
  // Abort frames carry a short message; the default limit is kMaxAbortBytes.
  FrameHeader a{FrameKind::kAbort, kMaxAbortBytes, Header{}};
  EXPECT_TRUE(decode_frame_header(encode(a)).ok());
  a.length = ~uint64_t{0};
  EXPECT_EQ(decode_frame_header(encode(a)).error,
            "abort frame length 18446744073709551615 exceeds the limit of 1024 bytes");
  // By default a data frame's length is left to the comparison with the posted recv.
  f.length = ~uint64_t{0};
  EXPECT_TRUE(decode_frame_header(encode(f)).ok());
}

TEST(TcpFrame, TruncatedHeaderIsRejectedWithoutOverRead) {
  Bytes b = encode(sample_data());
  for (size_t n = 0; n < kFrameHeaderBytes; ++n) {
    // A heap copy of exactly n bytes, so a sanitizer build would catch an over-read.
    std::vector<uint8_t> part(b.begin(), b.begin() + n);
    FrameDecode d = decode_frame_header(part);
    ASSERT_FALSE(d.ok()) << n;
    EXPECT_EQ(d.error, "truncated frame header: " + std::to_string(n) + " of 48 bytes");
  }
  // Bytes past the header (the payload) are not the decoder's business.
  std::vector<uint8_t> longer(b.begin(), b.end());
  longer.resize(100, 0xee);
  EXPECT_TRUE(decode_frame_header(longer).ok());
}

// Random bytes, biased so that every check is reached: a fixed seed keeps failures replayable.
TEST(TcpFrame, RandomBytesNeverCrashAndAcceptedHeadersReencodeIdentically) {
  std::mt19937_64 rng(20261122);
  FrameLimits limits;
  limits.max_data_bytes = 1u << 20;
  int accepted = 0, bad_magic = 0, bad_flags = 0, too_long = 0;
  for (int it = 0; it < 10000; ++it) {
    std::vector<uint8_t> bytes(rng() % 4 == 0 ? rng() % 64 : kFrameHeaderBytes);
    for (auto& x : bytes) x = uint8_t(rng());
    if (bytes.size() >= 8 && rng() % 4 != 0) {
      std::memcpy(bytes.data(), &kFrameMagic, 4);
      uint32_t flags = rng() % 2 ? uint32_t(rng() % 4) : uint32_t(rng());
      std::memcpy(bytes.data() + 4, &flags, 4);
    }
    if (bytes.size() >= 16 && rng() % 2) {
      uint64_t length = rng() % 2048;
      std::memcpy(bytes.data() + 8, &length, 8);
    }
    FrameDecode d = decode_frame_header(bytes, limits);
    if (!d.ok()) {
      bad_magic += d.error.starts_with("bad frame magic");
      bad_flags += d.error.starts_with("bad frame flags");
      too_long += d.error.find("exceeds the limit") != std::string::npos;
      continue;
    }
    ++accepted;
    ASSERT_GE(bytes.size(), kFrameHeaderBytes);
    Bytes again = encode(d.frame);
    ASSERT_TRUE(std::equal(again.begin(), again.end(), bytes.begin())) << "iteration " << it;
    uint64_t max = d.frame.kind == FrameKind::kAbort ? kMaxAbortBytes : limits.max_data_bytes;
    ASSERT_LE(d.frame.length, max) << "iteration " << it;
  }
  // Every branch was exercised, so the loop can fail.
  EXPECT_GT(accepted, 500);
  EXPECT_GT(bad_magic, 500);
  EXPECT_GT(bad_flags, 500);
  EXPECT_GT(too_long, 500);
}

}  // namespace
}  // namespace cohort::comm::transport::tcp
