#pragma once
// The parameter server's messages, carried as service-channel requests (net/service). Every
// request starts with its kind and the worker's rank; the server answers each one:
//
//   hello  {rank, num_workers, total_steps, [(name, numel)],  -> HelloReply    first, and
//           codec spec[, shared area offer]}                                    again after a
//          reconnect (a restarted server tells where it resumed); the codec spec (CodecSpec,
//          push_codec.h) must be the server's
//   pull   {rank}                                              -> f32[range]   current values
//   push   {rank, step, begin, end, codec, flags, zero byte,   -> {PushReply, f32[range]}
//           f32[end - begin] grads}  (the header is 32 bytes: the grads are 16-byte aligned in
//           a received payload, so a server applies them where they lie). codec 0: the grads
//           as f32; else a compress::Method and, instead of the grads, its message
//           (push_codec.h). flags 1: the grads are in the worker's shared area (shared_area.h)
//           and nothing follows the header; the answer's values are then in the area too
//           (PushReply::shared), not in the answer
//          BSP: answered once the step's update is applied (push + pull in one round trip,
//          BytePS's push_pull); ASP: at once, after this push's update; SSP: once the slowest
//          worker is close enough (consistency.h)
//   bye    {rank[, u8 wants_final]}                            -> {}            clean shutdown
//          (a server that checkpoints saves one first: the worker's last pushes are durable);
//          with wants_final the server stays until that worker, answered, closes its connection
//   final  {rank}  (after its bye)                             -> FinalState    the job's end:
//          [, f32[range]] the values once every worker said bye, else how far the job is (the
//          worker asks again; it gives up when that stops moving for its timeout)
//
// Little-endian, fixed-width integers; strings and arrays are length-prefixed (u32 / i64).
// Malformed input throws InvalidArgument (the server fails that request, naming it).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cohort/net/service/wire.h"
#include "cohort/ps/partition.h"
#include "cohort/ps/shared_area.h"
#include "cohort/rendezvous/store.h"

namespace cohort::ps {

using net::service::Bytes;

// Where server i publishes its "host:port" in the job's rendezvous store: each start of it
// (the first, then every restart) increments generation_key(i) and sets
// server_key(i, generation). A worker whose server went away waits for a higher generation.
inline std::string generation_key(int index) {
  return "ps/server/" + std::to_string(index) + "/generation";
}
inline std::string server_key(int index, int64_t generation) {
  return "ps/server/" + std::to_string(index) + "/" + std::to_string(generation);
}
// The server side of the above; returns the generation it published.
int64_t publish_server(rendezvous::Store& store, int index, const std::string& address);

enum class MsgKind : uint8_t { kHello = 1, kPull = 2, kPush = 3, kBye = 4, kFinal = 5 };

// How a worker's pushes are compressed (push_codec.h), agreed at hello: a mismatch the push's
// size would not show (QSGD's levels, random-k's seed) is refused before any push.
struct CodecSpec {
  uint8_t method = 0;  // compress::Method; 0: none (the rest is then 0)
  double ratio = 0;
  int32_t levels = 0;
  uint64_t seed = 0;
  bool operator==(const CodecSpec&) const = default;
};

struct Hello {
  int32_t rank = 0;
  int32_t num_workers = 0;
  int64_t total_steps = 0;  // for the server's LR schedule (0: unknown)
  Layout layout;
  CodecSpec codec;
  std::optional<SharedOffer> shared;  // a same-host shared area (shared_area.h), if offered
};

struct Push {
  int32_t rank = 0;
  int64_t step = 0;
  KeyRange range;
  // `count` f32 values pointing into the decoded payload, 32 bytes after its start (aligned
  // as a float when the payload's buffer is, e.g. a freshly allocated Bytes).
  const uint8_t* grads = nullptr;
  int64_t count = 0;
  // A compressed push (push_codec.h): codec != 0 and `bytes` of message at `grads`; count 0.
  uint8_t codec = 0;
  size_t bytes = 0;
  // The grads are in the worker's shared area (shared_area.h), not in the message: grads is
  // null, count the range's size; the server points grads into the area.
  bool shared = false;
};

// The server's answer to a hello.
struct HelloReply {
  int64_t next_step = 0;    // the step this worker's next push must carry (0 when fresh; after
                            // a restart, the step the checkpoint resumed from)
  uint8_t checkpoints = 0;  // the server checkpoints: the worker keeps its pushes since the last
                            // durable one, to replay them if the server restarts
  uint8_t shared = 0;       // the server mapped the hello's shared area: pushes may use it
};

// What a server tells a worker about its push, before the values.
struct PushReply {
  int64_t version = 0;    // server updates applied when the values were read
  int32_t staleness = 0;  // updates applied between the worker's last pull and this push
  int32_t lead = 0;       // steps the worker was ahead of the slowest (SSP bounds it)
  uint8_t dropped = 0;    // BSP with backup workers: the push came late and was not used
  double held_s = 0;      // how long the server held the answer (SSP's block)
  int64_t durable = 0;    // this worker's pushes of steps < durable are in a checkpoint
  uint8_t shared = 0;     // the values are in the worker's shared area, not in the answer
};

Bytes encode_hello(const Hello& h);
Bytes encode_hello_reply(const HelloReply& r);
HelloReply decode_hello_reply(const Bytes& b, const std::string& what);
Bytes encode_simple(MsgKind kind, int32_t rank);  // pull, bye, final
Bytes encode_bye(int32_t rank, bool wants_final);
bool wants_final(const Bytes& bye);

// The answer to `final`: whether every worker said bye (then the values follow), how many
// did, and a counter that moves with every update (the waiting worker's sign of life).
struct FinalState {
  bool done = false;
  int32_t finished = 0, workers = 0;
  int64_t progress = 0;
};
Bytes encode_final(const FinalState& f, const float* v, int64_t n);  // v: null unless done
// The state; when done, its `n` floats into out (InvalidArgument naming `what` otherwise).
FinalState decode_final(const Bytes& b, float* out, int64_t n, const std::string& what);
// The header of a push; the gradients follow (append_floats), so they are copied once.
Bytes encode_push(int32_t rank, int64_t step, KeyRange range, const float* grads);
// The header of a push whose gradients are in the worker's shared area (nothing follows).
Bytes encode_shared_push(int32_t rank, int64_t step, KeyRange range);
// A compressed push's header (codec != 0) followed by `message_bytes` zeros, into which the
// caller encodes the message (push_message): the message is written once, in place.
Bytes encode_push_frame(int32_t rank, int64_t step, KeyRange range, uint8_t codec,
                        size_t message_bytes);
// The message part of a frame from encode_push_frame.
std::span<uint8_t> push_message(Bytes& frame);

MsgKind peek_kind(const Bytes& b);  // InvalidArgument for an empty or unknown message
int32_t peek_rank(const Bytes& b);
Hello decode_hello(const Bytes& b);
Push decode_push(const Bytes& b);

Bytes floats_to_bytes(const float* v, int64_t n);
// v null: the values are in the worker's shared area (r.shared must be set), none follow.
Bytes encode_push_reply(const PushReply& r, const float* v, int64_t n);
// The reply's header; its `n` floats into out, from the answer or, when the server put them
// there, from `shared` (the worker's area; InvalidArgument naming `what` when it has none, or
// when the answer's size is wrong).
PushReply decode_push_reply(const Bytes& b, float* out, int64_t n, const std::string& what,
                            const float* shared = nullptr);
// InvalidArgument if the payload is not exactly `n` floats (names `what`).
void bytes_to_floats(const Bytes& b, float* out, int64_t n, const std::string& what);

}  // namespace cohort::ps
