#include "python/src/group.h"

#include <chrono>

#include "cohort/core/error.h"

namespace py = pybind11;

namespace cohort::pybind {

PyWork::PyWork(comm::Work work, std::vector<std::shared_ptr<BufferArg>> keep)
    : work_(std::move(work)), keep_(std::move(keep)) {}

PyWork::~PyWork() {
  // Dropped while running: the network may still write the buffers we hold, so wait for the
  // operation (bounded by its own deadline) before letting them go.
  if (work_.valid() && !work_.done()) {
    py::gil_scoped_release nogil;
    work_.wait_issued();
  }
}

bool PyWork::wait(std::optional<double> timeout_s) {
  COHORT_CHECK_ARG(!timeout_s || *timeout_s >= 0, "Work.wait: timeout must be >= 0 seconds, got ",
                   *timeout_s);
  try {
    py::gil_scoped_release nogil;
    if (timeout_s)
      work_.wait(std::chrono::milliseconds(static_cast<long long>(*timeout_s * 1000.0 + 0.5)));
    else
      work_.wait();
  } catch (...) {
    if (work_.done()) keep_.clear();  // failed: nothing writes the buffers any more
    throw;
  }
  keep_.clear();
  return true;
}

std::shared_ptr<PyGroup> PyGroup::make(std::shared_ptr<comm::ProcessGroup> pg,
                                       std::shared_ptr<Session> session) {
  std::shared_ptr<PyGroup> g(new PyGroup(std::move(pg), session));
  std::lock_guard<std::mutex> lock(session->mu);
  session->groups.push_back(g);
  return g;
}

PyGroup::~PyGroup() {
  close();
}

void PyGroup::close() {
  if (!pg_) return;
  std::shared_ptr<comm::ProcessGroup> pg = std::move(pg_);
  py::gil_scoped_release nogil;  // destroying a communicator joins its threads
  pg.reset();
}

comm::ProcessGroup& PyGroup::pg(const char* op) const {
  COHORT_CHECK_ARG(!session_->closed && pg_, "ProcessGroup.", op,
                   ": this process left the world (cohort.shutdown() or World.close()); call "
                   "cohort.init() again for a new one");
  return *pg_;
}

}  // namespace cohort::pybind
