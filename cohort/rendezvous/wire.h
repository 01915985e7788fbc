#pragma once
// The TcpStore wire protocol, after authentication (auth.h). Parsing is a pure function over
// bytes, so tests/fuzz/store_frame_fuzz.cc can feed it anything. Frames are cut by frame.h (the
// parser the service channel uses too); this file gives the store's magics, kinds and bodies.
//
// Every frame: a 9-byte header, then body_len bytes of body. Integers are little-endian.
//   request:  magic u32 "cST1" | command u8 | body_len u32 | body
//   response: magic u32 "cSR1" | status  u8 | body_len u32 | body
//
// Request bodies (str = u32 length + bytes, 1..kMaxKeyBytes; blob = u32 length + bytes,
// 0..kMaxValueBytes; keys = u32 count (1..kMaxKeysPerRequest) + that many str):
//   kSet         key:str value:blob
//   kGet         timeout_ms:u64 key:str         answered when the key exists, or kTimeout
//   kAdd         key:str delta:i64
//   kCompareSet  key:str expected:blob desired:blob
//   kDelete      key:str
//   kCheck       keys
//   kWait        timeout_ms:u64 keys            answered when all exist, or kTimeout
// Response bodies by status:
//   kOk          kSet, kWait: empty; kGet, kCompareSet: value:blob; kAdd: i64;
//                kDelete, kCheck: u8 (0 or 1)
//   kTimeout     keys (those still missing)
//   kInvalidArgument  message:blob (at most kMaxMessageBytes)
//
// Everything is checked: magic, command or status, body_len against the cap (before any of the
// body is read), every length against the bytes present, and that the body has no trailing
// bytes. A frame that fails any check is malformed and its connection is dropped.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cohort/net/frame.h"
#include "cohort/rendezvous/store.h"

namespace cohort::rendezvous::wire {

inline constexpr uint32_t kRequestMagic = 0x31545363;   // "cST1"
inline constexpr uint32_t kResponseMagic = 0x31525363;  // "cSR1"
inline constexpr size_t kHeaderBytes = net::frame::kHeaderBytes;
inline constexpr size_t kMaxKeysPerRequest = 65536;
inline constexpr size_t kMaxMessageBytes = 4096;
// The largest legal body: kCompareSet with the largest key and two largest values.
inline constexpr size_t kMaxBodyBytes = 2 * kMaxValueBytes + kMaxKeyBytes + 64;

enum class Command : uint8_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kCompareSet = 4,
  kDelete = 5,
  kCheck = 6,
  kWait = 7,
};
const char* command_name(Command c);

enum class Status : uint8_t { kOk = 0, kTimeout = 1, kInvalidArgument = 2 };

struct Request {
  Command command = Command::kSet;
  std::vector<std::string> keys;  // one for every command but kCheck and kWait
  Bytes value;                    // kSet value, kCompareSet desired
  Bytes expected;                 // kCompareSet
  int64_t delta = 0;              // kAdd
  uint64_t timeout_ms = 0;        // kGet, kWait
};

struct Response {
  Status status = Status::kOk;
  Bytes value;                    // kGet, kCompareSet; the message for kInvalidArgument
  int64_t number = 0;             // kAdd; 0/1 for kDelete and kCheck
  std::vector<std::string> keys;  // kTimeout: the keys still missing
};

// kOk: bytes of the frame consumed. kNeedMore: the whole frame's size once the header is in
// (0 before), so a reader can ask for exactly the rest. kMalformed: error says what was wrong.
using ParseStatus = net::frame::Status;
using ParseResult = net::frame::Result;

// Parses one request from the front of buf.
ParseResult parse_request(std::span<const uint8_t> buf, Request* out);
// Parses one response to a request of the given command from the front of buf.
ParseResult parse_response(std::span<const uint8_t> buf, Command command, Response* out);
// Append one frame to out. encode(parse(x)) reproduces x exactly (the fuzzer checks it).
void encode_request(const Request& request, Bytes* out);
void encode_response(Command command, const Response& response, Bytes* out);

}  // namespace cohort::rendezvous::wire
