#pragma once
// The parameter server's messages, carried as service-channel requests (comm/service). Every
// request starts with its kind and the worker's rank; the server answers each one:
//
//   hello  {rank, num_workers, total_steps, [(name, numel)]}  -> {}            once, first
//   pull   {rank}                                              -> f32[range]   current values
//   push   {rank, step, begin, end, f32[end - begin] grads}    -> f32[range]   BSP: answered
//          once every worker's push of `step` arrived and the update is applied (push + pull
//          in one round trip, BytePS's push_pull)
//   bye    {rank}                                              -> {}            clean shutdown
//
// Little-endian, fixed-width integers; strings and arrays are length-prefixed (u32 / i64).
// Malformed input throws InvalidArgument (the server fails that request, naming it).
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/comm/service/wire.h"
#include "cohort/ps/partition.h"

namespace cohort::ps {

using comm::service::Bytes;

// Where server i publishes its "host:port" in the job's rendezvous store.
inline std::string server_key(int index) {
  return "ps/server/" + std::to_string(index);
}

enum class MsgKind : uint8_t { kHello = 1, kPull = 2, kPush = 3, kBye = 4 };

struct Hello {
  int32_t rank = 0;
  int32_t num_workers = 0;
  int64_t total_steps = 0;  // for the server's LR schedule (0: unknown)
  Layout layout;
};

struct Push {
  int32_t rank = 0;
  int64_t step = 0;
  KeyRange range;
  // `count` f32 values (unaligned: copy them out), pointing into the decoded payload.
  const uint8_t* grads = nullptr;
  int64_t count = 0;
};

Bytes encode_hello(const Hello& h);
Bytes encode_simple(MsgKind kind, int32_t rank);  // pull, bye
// The header of a push; the gradients follow (append_floats), so they are copied once.
Bytes encode_push(int32_t rank, int64_t step, KeyRange range, const float* grads);

MsgKind peek_kind(const Bytes& b);  // InvalidArgument for an empty or unknown message
int32_t peek_rank(const Bytes& b);
Hello decode_hello(const Bytes& b);
Push decode_push(const Bytes& b);

Bytes floats_to_bytes(const float* v, int64_t n);
// InvalidArgument if the payload is not exactly `n` floats (names `what`).
void bytes_to_floats(const Bytes& b, float* out, int64_t n, const std::string& what);

}  // namespace cohort::ps
