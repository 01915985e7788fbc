#include "cohort/ps/shared_area.h"

#include <cstring>

#include "cohort/comm/transport/shm/shm_arena.h"
#include "cohort/core/error.h"
#include "cohort/net/secret.h"

namespace cohort::ps {
namespace {

constexpr size_t kHeaderBytes = 64;
constexpr size_t kAlign = 64;
// The names this module creates (ShmArena's), and nothing else: a hello cannot make a server
// map an arbitrary /dev/shm object.
constexpr const char* kNamePrefix = "/cohort-arena-";

size_t half_bytes(int64_t count) {
  return (size_t(count) * sizeof(float) + kAlign - 1) / kAlign * kAlign;
}

struct Header {
  std::array<uint8_t, 16> token;
  int64_t count;
};
static_assert(sizeof(Header) <= kHeaderBytes);

}  // namespace

size_t SharedArea::bytes_for(int64_t count) {
  return kHeaderBytes + 2 * half_bytes(count);
}

void SharedArea::place(char* base) {
  grads_ = reinterpret_cast<float*>(base + kHeaderBytes);
  values_ = reinterpret_cast<float*>(base + kHeaderBytes + half_bytes(offer_.count));
}

std::unique_ptr<SharedArea> SharedArea::create(int64_t count, int rank) {
  COHORT_CHECK_ARG(count > 0, "ps shared area: a range of ", count, " values");
  std::unique_ptr<SharedArea> a(new SharedArea());
  a->offer_.count = count;
  a->arena_ = comm::transport::ShmArena::create(bytes_for(count), rank, &a->offer_.name);
  char* base = static_cast<char*>(a->arena_->allocate(bytes_for(count)));  // all of it, at 0
  net::random_bytes(a->offer_.token);
  Header h{a->offer_.token, count};
  std::memcpy(base, &h, sizeof(h));
  a->place(base);
  return a;
}

std::unique_ptr<SharedArea> SharedArea::open(const SharedOffer& offer, int64_t count,
                                             std::string* why) {
  const std::string& n = offer.name;
  if (n.rfind(kNamePrefix, 0) != 0 || n.find('/', 1) != std::string::npos || n.size() > 64) {
    *why = detail::str("'", n, "' is not a cohort shared area's name");
    return nullptr;
  }
  if (offer.count != count) {
    *why = detail::str("it offers ", offer.count, " keys, this server's model has ", count);
    return nullptr;
  }
  std::unique_ptr<SharedArea> a(new SharedArea());
  a->offer_ = offer;
  try {
    a->arena_ = comm::transport::ShmArena::open(n, -1);
  } catch (const IoError& e) {  // not on this host (or gone already)
    *why = e.what();
    return nullptr;
  }
  Header h{};
  if (a->arena_->size() != bytes_for(count)) {
    *why =
        detail::str("its segment has ", a->arena_->size(), " bytes, expected ", bytes_for(count));
    return nullptr;
  }
  std::memcpy(&h, a->arena_->base(), sizeof(h));
  if (h.token != offer.token || h.count != count) {
    *why = "its segment does not carry the token of its hello (another host's segment?)";
    return nullptr;
  }
  a->place(a->arena_->base());
  return a;
}

SharedArea::~SharedArea() = default;

void SharedArea::unlink() {
  if (arena_) arena_->unlink_name();
}

}  // namespace cohort::ps
