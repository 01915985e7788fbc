#include "cohort/rendezvous/wire.h"

#include <cstring>

#include "cohort/core/bytes.h"
#include "cohort/core/error.h"

namespace cohort::rendezvous::wire {
namespace {

// Bounds-checked little-endian reader over one frame body. Each read returns false (and
// records why) instead of running past the end: the store's parser reports a malformed frame
// to its caller (and the fuzzer) rather than throwing, so it wraps core/bytes.h's load() instead
// of using bytes::Reader.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> body) : body_(body) {}

  template <typename T>
  bool number(T* out, const char* what) {
    if (!need(sizeof(T), what)) return false;
    *out = bytes::load<T>(body_.data() + pos_);
    pos_ += sizeof(T);
    return true;
  }
  bool blob(Bytes* out, size_t max, const char* what) {
    uint32_t n = 0;
    if (!number(&n, what)) return false;
    if (n > max) return fail(detail::str(what, " length ", n, " exceeds the limit of ", max));
    if (!need(n, what)) return false;
    out->assign(body_.begin() + pos_, body_.begin() + pos_ + n);
    pos_ += n;
    return true;
  }
  bool key(std::string* out) {
    uint32_t n = 0;
    if (!number(&n, "key")) return false;
    if (n == 0 || n > kMaxKeyBytes)
      return fail(detail::str("key length ", n, " outside 1..", kMaxKeyBytes));
    if (!need(n, "key")) return false;
    out->assign(reinterpret_cast<const char*>(body_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  bool keys(std::vector<std::string>* out, size_t min_count) {
    uint32_t count = 0;
    if (!number(&count, "key count")) return false;
    if (count < min_count || count > kMaxKeysPerRequest)
      return fail(
          detail::str("key count ", count, " outside ", min_count, "..", kMaxKeysPerRequest));
    // Each key takes at least 5 bytes: a count that cannot fit is rejected before allocating.
    if (size_t(count) * 5 > body_.size() - pos_)
      return fail(detail::str("key count ", count, " does not fit in the body"));
    out->resize(count);
    for (auto& k : *out)
      if (!key(&k)) return false;
    return true;
  }
  bool finish() {
    if (pos_ != body_.size())
      return fail(detail::str(body_.size() - pos_, " trailing bytes after the body"));
    return ok_;
  }
  const std::string& error() const { return error_; }

 private:
  bool need(size_t n, const char* what) {
    if (n <= body_.size() - pos_) return true;
    return fail(detail::str(what, " needs ", n, " bytes, body has ", body_.size() - pos_, " left"));
  }
  bool fail(std::string why) {
    if (ok_) error_ = std::move(why);
    ok_ = false;
    return false;
  }
  std::span<const uint8_t> body_;
  size_t pos_ = 0;
  bool ok_ = true;
  std::string error_;
};

class Writer {
 public:
  explicit Writer(Bytes* out) : out_(out) {}
  template <typename T>
  void number(T v) {
    bytes::put(*out_, v);
  }
  void blob(const void* p, size_t n) {
    number(uint32_t(n));
    auto* b = static_cast<const uint8_t*>(p);
    out_->insert(out_->end(), b, b + n);
  }
  void blob(const Bytes& b) { blob(b.data(), b.size()); }
  void str(const std::string& s) { blob(s.data(), s.size()); }
  void keys(const std::vector<std::string>& ks) {
    number(uint32_t(ks.size()));
    for (const auto& k : ks) str(k);
  }

 private:
  Bytes* out_;
};

ParseResult malformed(std::string why) {
  return ParseResult{ParseStatus::kMalformed, 0, std::move(why)};
}

const net::frame::Spec kRequestSpec{
    kRequestMagic, uint8_t(Command::kSet), uint8_t(Command::kWait), kMaxBodyBytes, "request",
    "command",     "cohort store peer"};
const net::frame::Spec kResponseSpec{
    kResponseMagic,     uint8_t(Status::kOk), uint8_t(Status::kInvalidArgument),
    kMaxBodyBytes,      "response",           "status",
    "cohort store peer"};

bool parse_request_body(Reader& r, Request* q) {
  q->keys.resize(1);
  switch (q->command) {
    case Command::kSet:
      return r.key(&q->keys[0]) && r.blob(&q->value, kMaxValueBytes, "value");
    case Command::kGet:
      return r.number(&q->timeout_ms, "timeout") && r.key(&q->keys[0]);
    case Command::kAdd:
      return r.key(&q->keys[0]) && r.number(&q->delta, "delta");
    case Command::kCompareSet:
      return r.key(&q->keys[0]) && r.blob(&q->expected, kMaxValueBytes, "expected") &&
             r.blob(&q->value, kMaxValueBytes, "desired");
    case Command::kDelete:
      return r.key(&q->keys[0]);
    case Command::kCheck:
      return r.keys(&q->keys, 0);
    case Command::kWait:
      return r.number(&q->timeout_ms, "timeout") && r.keys(&q->keys, 1);
  }
  return false;
}

}  // namespace

const char* command_name(Command c) {
  switch (c) {
    case Command::kSet:
      return "set";
    case Command::kGet:
      return "get";
    case Command::kAdd:
      return "add";
    case Command::kCompareSet:
      return "compare_set";
    case Command::kDelete:
      return "delete_key";
    case Command::kCheck:
      return "check";
    case Command::kWait:
      return "wait";
  }
  return "unknown";
}

ParseResult parse_request(std::span<const uint8_t> buf, Request* out) {
  net::frame::Frame f;
  ParseResult res = net::frame::parse(buf, kRequestSpec, &f);
  if (res.status != ParseStatus::kOk) return res;
  *out = Request{};
  out->command = Command(f.kind);
  Reader r(f.body);
  if (!parse_request_body(r, out) || !r.finish())
    return malformed(detail::str(command_name(out->command), " request: ", r.error()));
  return res;
}

ParseResult parse_response(std::span<const uint8_t> buf, Command command, Response* out) {
  net::frame::Frame f;
  ParseResult res = net::frame::parse(buf, kResponseSpec, &f);
  if (res.status != ParseStatus::kOk) return res;
  *out = Response{};
  out->status = Status(f.kind);
  Reader r(f.body);
  bool ok = true;
  if (out->status == Status::kTimeout) {
    ok = r.keys(&out->keys, 0);
  } else if (out->status == Status::kInvalidArgument) {
    ok = r.blob(&out->value, kMaxMessageBytes, "message");
  } else if (command == Command::kGet || command == Command::kCompareSet) {
    ok = r.blob(&out->value, kMaxValueBytes, "value");
  } else if (command == Command::kAdd) {
    ok = r.number(&out->number, "counter");
  } else if (command == Command::kDelete || command == Command::kCheck) {
    uint8_t flag = 0;
    ok = r.number(&flag, "flag");
    if (ok && flag > 1) return malformed(detail::str("flag byte ", int(flag), " is not 0 or 1"));
    out->number = flag;
  }
  if (!ok || !r.finish())
    return malformed(detail::str(command_name(command), " response: ", r.error()));
  return res;
}

namespace {
// Writes the header with a placeholder length and patches it once the body is written.
template <typename Fn>
void encode_frame(Bytes* out, uint32_t magic, uint8_t kind, Fn&& body) {
  const size_t start = net::frame::begin(out, magic, kind);
  Writer w(out);
  body(w);
  net::frame::finish(out, start);
}
}  // namespace

void encode_request(const Request& q, Bytes* out) {
  encode_frame(out, kRequestMagic, uint8_t(q.command), [&](Writer& w) {
    switch (q.command) {
      case Command::kSet:
        w.str(q.keys.at(0)), w.blob(q.value);
        break;
      case Command::kGet:
        w.number(q.timeout_ms), w.str(q.keys.at(0));
        break;
      case Command::kAdd:
        w.str(q.keys.at(0)), w.number(q.delta);
        break;
      case Command::kCompareSet:
        w.str(q.keys.at(0)), w.blob(q.expected), w.blob(q.value);
        break;
      case Command::kDelete:
        w.str(q.keys.at(0));
        break;
      case Command::kCheck:
        w.keys(q.keys);
        break;
      case Command::kWait:
        w.number(q.timeout_ms), w.keys(q.keys);
        break;
    }
  });
}

void encode_response(Command command, const Response& r, Bytes* out) {
  encode_frame(out, kResponseMagic, uint8_t(r.status), [&](Writer& w) {
    if (r.status == Status::kTimeout) return w.keys(r.keys);
    if (r.status == Status::kInvalidArgument)
      return w.blob(r.value.data(), std::min(r.value.size(), kMaxMessageBytes));
    switch (command) {
      case Command::kGet:
      case Command::kCompareSet:
        w.blob(r.value);
        break;
      case Command::kAdd:
        w.number(r.number);
        break;
      case Command::kDelete:
      case Command::kCheck:
        w.number(uint8_t(r.number != 0));
        break;
      case Command::kSet:
      case Command::kWait:
        break;
    }
  });
}

}  // namespace cohort::rendezvous::wire
