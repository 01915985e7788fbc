// libFuzzer target for the TcpStore frame parser (cohort/rendezvous/wire.h), the first code
// that touches bytes from an authenticated but possibly buggy or hostile peer.
//
// Checks, beyond "no crash, no over-read, no huge allocation" (ASan/UBSan do those):
//   - every frame the parser accepts re-encodes to exactly the bytes it consumed;
//   - kNeedMore never claims a frame size over the cap, and never shrinks as bytes arrive.
// Run: store_frame_fuzz -max_len=4096 corpus_dir tests/fuzz/corpus/store_frame
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "cohort/rendezvous/wire.h"

using namespace cohort::rendezvous;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void fuzz_requests(std::span<const uint8_t> data) {
  // As a stream: parse frame after frame until the bytes run out or one is malformed.
  while (!data.empty()) {
    wire::Request q;
    auto r = wire::parse_request(data, &q);
    if (r.status == wire::ParseStatus::kNeedMore) {
      check(r.size == 0 ||
            (r.size > data.size() && r.size <= wire::kHeaderBytes + wire::kMaxBodyBytes));
      return;
    }
    if (r.status == wire::ParseStatus::kMalformed) return;
    check(r.size >= wire::kHeaderBytes && r.size <= data.size());
    Bytes again;
    wire::encode_request(q, &again);
    check(again.size() == r.size && std::memcmp(again.data(), data.data(), r.size) == 0);
    data = data.subspan(r.size);
  }
}

void fuzz_response(std::span<const uint8_t> data, wire::Command command) {
  wire::Response resp;
  auto r = wire::parse_response(data, command, &resp);
  if (r.status != wire::ParseStatus::kOk) return;
  Bytes again;
  wire::encode_response(command, resp, &again);
  check(again.size() == r.size && std::memcmp(again.data(), data.data(), r.size) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  fuzz_requests(bytes);
  // Responses: the first byte picks the command the client would be waiting on.
  if (size > 0) fuzz_response(bytes.subspan(1), wire::Command(1 + data[0] % 7));
  return 0;
}
