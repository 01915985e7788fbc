// libFuzzer target for the service channel's frames (cohort/net/service/wire.h), cut by the
// frame parser the rendezvous store shares (cohort/net/frame.h): the first code that
// touches bytes from an authenticated but possibly buggy or hostile peer of a long-lived
// server (parameter server, federated server), and, on the client, from the server.
//
// Checks, beyond "no crash, no over-read, no huge allocation" (ASan/UBSan do those):
//   - every frame the parser accepts re-encodes to exactly the bytes it consumed, with a
//     payload within the limit;
//   - kNeedMore never claims a frame size over the limit, nor one the bytes present already
//     hold;
//   - a tighter limit never accepts what a looser one refuses.
// Run: service_frame_fuzz -max_len=4096 corpus_dir tests/fuzz/corpus/service_frame
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "cohort/net/service/wire.h"

using namespace cohort::net::service;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// As a stream: frame after frame until the bytes run out or one is malformed. Returns how many
// frames were accepted.
size_t fuzz_stream(std::span<const uint8_t> data, size_t max_payload) {
  size_t frames = 0;
  while (!data.empty()) {
    Frame f;
    auto r = parse_frame(data, max_payload, &f);
    if (r.status == ParseStatus::kNeedMore) {
      check(r.size == 0 ||
            (r.size > data.size() && r.size <= kHeaderBytes + kIdBytes + max_payload));
      return frames;
    }
    if (r.status == ParseStatus::kMalformed) {
      check(!r.error.empty());
      return frames;
    }
    check(r.size >= kHeaderBytes + kIdBytes && r.size <= data.size());
    check(f.payload.size() <= max_payload && f.payload.size() == r.size - kHeaderBytes - kIdBytes);
    check(f.kind != Kind::kMessage || f.id == 0);
    Bytes again;
    encode_frame(f.kind, f.id, f.payload, &again);
    check(again.size() == r.size && std::memcmp(again.data(), data.data(), r.size) == 0);
    data = data.subspan(r.size);
    frames++;
  }
  return frames;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  const size_t loose = fuzz_stream(bytes, size_t{64} << 20);  // the default limit
  const size_t tight = fuzz_stream(bytes, 64);
  check(tight <= loose);
  return 0;
}
