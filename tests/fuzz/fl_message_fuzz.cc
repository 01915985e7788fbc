// libFuzzer target for the federated protocol's messages (cohort/federated/messages.h): what a
// federated server decodes from any authenticated client (hello, update, secure-aggregation
// messages) and a client from the server (task). The first byte picks the decoder.
//
// Checks, beyond "no crash, no over-read, no huge allocation" (ASan/UBSan do those):
//   - a malformed message is InvalidArgument, never another exception;
//   - every message a decoder accepts re-encodes to exactly the bytes it was given.
// Run: fl_message_fuzz -max_len=4096 corpus_dir tests/fuzz/corpus/fl_message
#include <cstddef>
#include <cstdint>

#include "cohort/core/error.h"
#include "cohort/federated/messages.h"

using namespace cohort::federated;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

template <typename Decode>
void round_trip(const Bytes& b, Decode decode) {
  try {
    const auto m = decode(b, "fuzz");
    check(encode(m) == b);
  } catch (const cohort::InvalidArgument&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Bytes b(data + 1, data + size);
  switch (data[0] % 5) {
    case 0:
      round_trip(b, decode_hello);
      break;
    case 1:
      round_trip(b, decode_task);
      break;
    case 2:
      round_trip(b, decode_update);
      break;
    case 3:
      round_trip(b, decode_secagg);
      break;
    default:
      round_trip(b, decode_welcome);
      break;
  }
  return 0;
}
