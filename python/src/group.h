#pragma once
// cohort.ProcessGroup and cohort.Work: comm::ProcessGroup's operations on Python buffers
// (buffer.h), in place, with the GIL released while they run so other Python threads go on.
//
// Lifetimes: an asynchronous operation's Work holds its buffers (the arrays and their buffer
// exports) until it is done, and a Work dropped before that waits for it first (the operation
// has its own deadline), so memory the network still writes is never freed. A World's groups
// share a Session: World.close() marks it closed and frees every group's communicator, and
// later calls on any of them fail with an error that says so.
#include <pybind11/pybind11.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "cohort/comm/process_group.h"
#include "python/src/buffer.h"

namespace cohort::pybind {

class PyGroup;

struct Session {
  std::atomic<bool> closed{false};
  std::mutex mu;                               // guards groups
  std::vector<std::weak_ptr<PyGroup>> groups;  // every group made from the world, to close
};

class PyWork {
 public:
  PyWork(comm::Work work, std::vector<std::shared_ptr<BufferArg>> keep);
  ~PyWork();
  PyWork(const PyWork&) = delete;
  PyWork& operator=(const PyWork&) = delete;
  // Blocks (GIL released) until done and raises the operation's error; with `timeout_s`, a
  // Timeout after that long (the operation keeps running). True once done.
  bool wait(std::optional<double> timeout_s);
  bool is_completed() const { return work_.done(); }
  const std::string& name() const { return work_.name(); }

 private:
  comm::Work work_;
  std::vector<std::shared_ptr<BufferArg>> keep_;
};

class PyGroup : public std::enable_shared_from_this<PyGroup> {
 public:
  static std::shared_ptr<PyGroup> make(std::shared_ptr<comm::ProcessGroup> pg,
                                       std::shared_ptr<Session> session);
  ~PyGroup();
  // Frees the communicator (GIL released: its threads are joined). Idempotent.
  void close();

  // The group, or InvalidArgument naming `op` once the world was closed.
  comm::ProcessGroup& pg(const char* op) const;
  bool open() const { return pg_ && !session_->closed; }
  const std::shared_ptr<Session>& session() const { return session_; }

 private:
  PyGroup(std::shared_ptr<comm::ProcessGroup> pg, std::shared_ptr<Session> session)
      : pg_(std::move(pg)), session_(std::move(session)) {}
  std::shared_ptr<comm::ProcessGroup> pg_;
  std::shared_ptr<Session> session_;
};

// Adds ReduceOp, Work and ProcessGroup to `m`.
void register_group(pybind11::module_& m);

}  // namespace cohort::pybind
