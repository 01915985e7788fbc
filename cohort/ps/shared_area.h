#pragma once
// SharedArea: a worker's pushes and the servers' answers through shared memory when they run
// on one host (ps.shared_memory, docs/ps.md "Same-host pushes"), instead of through the socket.
//
// Over the socket one push-and-pull of a range moves its values nine times: out of the
// gradients into a flat buffer, into the request, through the kernel twice, then back: out of
// the shard into the answer, through the kernel twice, into the worker's flat values, into the
// parameters. Through a shared area it is three: the worker gathers its gradients into the
// area, the server reads (ASP: applies) them where they lie and writes its values into the
// area, the worker scatters them into its parameters. The request and the answer still go
// over the socket, header only: they order the accesses (the worker touches a server's slice
// only between that server's answer and its next push; the server only while it handles that
// push), so no lock or flag lives in the area.
//
// One area per worker: the flat gradient and values of the whole key space; server i uses
// its range's slice. The worker creates it (/dev/shm, 0600, a random name, comm/transport's
// ShmArena) with a random 16-byte token at its start and offers name and token in its hellos.
// A server that can open it (same host: the name exists there) and finds the token and the
// size it expects maps it and says so in its answer; anything else (another host, another
// size) is answered "no", and that link uses the socket as before. The worker unlinks the
// name once every server answered its first hello, so a crash leaves nothing behind (a server
// restarted later cannot map it: its link uses the socket).
//
// Layout: [64-byte header: token, count][grads: count f32, padded to 64][values: count f32].
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace cohort::comm::transport {
class ShmArena;
}

namespace cohort::ps {

// What a worker's hello offers.
struct SharedOffer {
  std::string name;
  std::array<uint8_t, 16> token{};
  int64_t count = 0;  // floats of each half (the model's keys)
  bool operator==(const SharedOffer&) const = default;
};

class SharedArea {
 public:
  // The worker's segment for `count` keys. IoError when /dev/shm has no room.
  static std::unique_ptr<SharedArea> create(int64_t count, int rank);
  // The server's mapping of an offer of `count` keys, or null (with *why set) when it cannot be
  // used here: not on this host (or unlinked already), another size, another token.
  static std::unique_ptr<SharedArea> open(const SharedOffer& offer, int64_t count,
                                          std::string* why);
  ~SharedArea();
  SharedArea(const SharedArea&) = delete;
  SharedArea& operator=(const SharedArea&) = delete;

  const SharedOffer& offer() const { return offer_; }
  float* grads() const { return grads_; }
  float* values() const { return values_; }
  void unlink();  // the worker, once every server answered its first hello

 private:
  SharedArea() = default;
  static size_t bytes_for(int64_t count);
  void place(char* base);

  SharedOffer offer_;
  std::shared_ptr<comm::transport::ShmArena> arena_;
  float* grads_ = nullptr;
  float* values_ = nullptr;
};

}  // namespace cohort::ps
