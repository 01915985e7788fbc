#include "cohort/comm/transport/transport.h"

#include "cohort/comm/transport/context.h"

namespace cohort::comm::transport {

std::string OpState::describe() const {
  return kind == OpKind::kSend ? detail::str("send #", seq, " to rank ", peer)
                               : detail::str("recv #", seq, " from rank ", peer);
}

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

bool Request::done() {
  COHORT_CHECK_ARG(op_ != nullptr, "Request::done: empty request");
  return ctx_->test(*op_);
}

void Request::wait(Deadline deadline) {
  COHORT_CHECK_ARG(op_ != nullptr, "Request::wait: empty request");
  ctx_->wait(*op_, deadline);
}

void Pair::fail(OpState& op, std::exception_ptr e) {
  op.error = std::move(e);
  op.status.store(2, std::memory_order_release);
}

const char* transport_name(TransportKind kind) {
  switch (kind) {
    case TransportKind::kAuto:
      return "auto";
    case TransportKind::kShm:
      return "shm";
    case TransportKind::kTcp:
      return "tcp";
  }
  return "?";
}

Device::Device(DeviceOptions options) : options_(std::move(options)) {
  size_t ring = options_.shm_ring_bytes;
  COHORT_CHECK_ARG(ring >= (size_t{64} << 10) && (ring & (ring - 1)) == 0,
                   "Device: shm_ring_bytes must be a power of two >= 65536, got ", ring);
  COHORT_CHECK_ARG(options_.tcp_socket_buffer > 0,
                   "Device: tcp_socket_buffer must be positive, got ", options_.tcp_socket_buffer);
}

}  // namespace cohort::comm::transport
