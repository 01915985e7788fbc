// The store's frame parser: every command round-trips, and every way a frame can be wrong is
// caught as malformed (never a crash, an over-read or an unbounded allocation).
#include <gtest/gtest.h>

#include "cohort/rendezvous/wire.h"

namespace cohort::rendezvous::wire {
namespace {

std::vector<Request> sample_requests() {
  std::vector<Request> out;
  Request q;
  q.command = Command::kSet, q.keys = {"rank0/addr"}, q.value = {1, 2, 3};
  out.push_back(q);
  q = Request{}, q.command = Command::kGet, q.keys = {"k"}, q.timeout_ms = 1234567;
  out.push_back(q);
  q = Request{}, q.command = Command::kAdd, q.keys = {"n"}, q.delta = -42;
  out.push_back(q);
  q = Request{}, q.command = Command::kCompareSet, q.keys = {"c"}, q.expected = {9}, q.value = {};
  out.push_back(q);
  q = Request{}, q.command = Command::kDelete, q.keys = {"d"};
  out.push_back(q);
  q = Request{}, q.command = Command::kCheck, q.keys = {};
  out.push_back(q);
  q = Request{}, q.command = Command::kWait, q.keys = {"a", "bb", "ccc"}, q.timeout_ms = 5;
  out.push_back(q);
  return out;
}

TEST(Wire, EveryRequestRoundTripsAndPartialFramesNeedMore) {
  for (const Request& q : sample_requests()) {
    Bytes frame;
    encode_request(q, &frame);
    Request back;
    auto r = parse_request(frame, &back);
    ASSERT_EQ(r.status, ParseStatus::kOk) << command_name(q.command) << ": " << r.error;
    EXPECT_EQ(r.size, frame.size());
    EXPECT_EQ(back.command, q.command);
    EXPECT_EQ(back.keys, q.keys);
    EXPECT_EQ(back.value, q.value);
    EXPECT_EQ(back.expected, q.expected);
    EXPECT_EQ(back.delta, q.delta);
    EXPECT_EQ(back.timeout_ms, q.timeout_ms);
    for (size_t n = 0; n < frame.size(); ++n) {
      auto partial = parse_request({frame.data(), n}, &back);
      EXPECT_EQ(partial.status, ParseStatus::kNeedMore) << n;
      // Once the header is in, the parser says how big the frame is.
      EXPECT_EQ(partial.size, n >= kHeaderBytes ? frame.size() : 0u);
    }
    // Two frames back to back: the first is consumed exactly.
    Bytes two = frame;
    two.insert(two.end(), frame.begin(), frame.end());
    EXPECT_EQ(parse_request(two, &back).size, frame.size());
  }
}

TEST(Wire, ResponsesRoundTrip) {
  Response r;
  r.value = {5, 6};
  Bytes f;
  encode_response(Command::kGet, r, &f);
  Response back;
  ASSERT_EQ(parse_response(f, Command::kGet, &back).status, ParseStatus::kOk);
  EXPECT_EQ(back.value, r.value);
  f.clear(), r = Response{}, r.number = -3;
  encode_response(Command::kAdd, r, &f);
  ASSERT_EQ(parse_response(f, Command::kAdd, &back).status, ParseStatus::kOk);
  EXPECT_EQ(back.number, -3);
  f.clear(), r = Response{}, r.status = Status::kTimeout, r.keys = {"x", "y"};
  encode_response(Command::kWait, r, &f);
  ASSERT_EQ(parse_response(f, Command::kWait, &back).status, ParseStatus::kOk);
  EXPECT_EQ(back.status, Status::kTimeout);
  EXPECT_EQ(back.keys, r.keys);
  // A kCheck flag other than 0/1 is malformed.
  f.clear(), r = Response{}, r.number = 1;
  encode_response(Command::kCheck, r, &f);
  f.back() = 2;
  EXPECT_EQ(parse_response(f, Command::kCheck, &back).status, ParseStatus::kMalformed);
}

ParseResult parse(const Bytes& b) {
  Request q;
  return parse_request(b, &q);
}

Bytes frame_of(const Request& q) {
  Bytes f;
  encode_request(q, &f);
  return f;
}

TEST(Wire, MalformedFramesAreNamed) {
  // Wrong magic is refused at the first byte: no need to wait for a header of garbage.
  auto r = parse(Bytes{'G'});
  EXPECT_EQ(r.status, ParseStatus::kMalformed);
  EXPECT_NE(r.error.find("magic"), std::string::npos);

  Bytes f = frame_of(sample_requests()[0]);
  f[4] = 99;
  EXPECT_NE(parse(f).error.find("unknown command byte 99"), std::string::npos);

  f = frame_of(sample_requests()[0]);
  f.resize(kHeaderBytes);
  f[5] = f[6] = f[7] = f[8] = 0xff;
  r = parse(f);
  EXPECT_EQ(r.status, ParseStatus::kMalformed);
  EXPECT_NE(r.error.find("body length 4294967295 exceeds the limit"), std::string::npos) << r.error;

  // A body longer than its fields: trailing bytes.
  f = frame_of(sample_requests()[4]);  // kDelete "d"
  f.push_back(0);
  f[5]++;
  EXPECT_NE(parse(f).error.find("trailing"), std::string::npos) << parse(f).error;

  // A key length that runs past the body.
  f = frame_of(sample_requests()[4]);
  f[kHeaderBytes] = 200;
  EXPECT_NE(parse(f).error.find("key needs 200 bytes"), std::string::npos) << parse(f).error;

  // An empty key.
  Request q;
  q.command = Command::kDelete, q.keys = {""};
  EXPECT_NE(parse(frame_of(q)).error.find("key length 0"), std::string::npos);

  // A key count that cannot fit in the body is refused before allocating for it.
  f = frame_of(sample_requests()[5]);                                // kCheck, 0 keys
  for (int i = 0; i < 4; ++i) f[kHeaderBytes + i] = i == 2 ? 1 : 0;  // 65536 keys
  EXPECT_EQ(parse(f).status, ParseStatus::kMalformed);
  // kWait needs at least one key.
  q = Request{}, q.command = Command::kWait;
  EXPECT_EQ(parse(frame_of(q)).status, ParseStatus::kMalformed);
}

}  // namespace
}  // namespace cohort::rendezvous::wire
