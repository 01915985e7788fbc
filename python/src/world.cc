// cohort._core.join and cohort.World: joining the job from the environment (comm/init.h) and
// leaving it. The Python package keeps one World as the default (cohort.init()); this layer
// holds no global state, so a test may make and close several in turn.
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <string>

#include "cohort/comm/init.h"
#include "cohort/core/error.h"
#include "python/src/group.h"
#include "python/src/world.h"

namespace py = pybind11;

namespace cohort::pybind {
namespace {

class PyWorld {
 public:
  PyWorld(std::unique_ptr<comm::World> world, std::string backend)
      : world_(std::move(world)),
        backend_(std::move(backend)),
        session_(std::make_shared<Session>()) {
    group_ = PyGroup::make(world_->group, session_);
  }
  ~PyWorld() { close(); }

  const comm::World& world(const char* what) const {
    COHORT_CHECK_ARG(world_ != nullptr, "World.", what,
                     ": this process left the world (cohort.shutdown() or World.close()); call "
                     "cohort.init() again for a new one");
    return *world_;
  }
  const std::shared_ptr<PyGroup>& group() const {
    world("group");
    return group_;
  }
  const std::string& backend() const { return backend_; }
  bool closed() const { return world_ == nullptr; }

  // Sub-groups first (they run over the world's connections), then the world group, then the
  // store (rank 0's server). Collective only in spirit: no rank waits for the others here, so
  // call barrier() first if a peer may still be talking to this one.
  void close() {
    if (!world_) return;
    session_->closed = true;
    std::vector<std::shared_ptr<PyGroup>> groups;
    {
      std::lock_guard<std::mutex> lock(session_->mu);
      for (auto& w : session_->groups)
        if (auto g = w.lock()) groups.push_back(std::move(g));
      session_->groups.clear();
    }
    for (auto it = groups.rbegin(); it != groups.rend(); ++it) (*it)->close();
    std::unique_ptr<comm::World> world = std::move(world_);
    world->group.reset();
    world->comm.reset();
    py::gil_scoped_release nogil;  // the communicator's and the store's threads are joined
    world.reset();
  }

 private:
  std::unique_ptr<comm::World> world_;
  std::string backend_;
  std::shared_ptr<Session> session_;
  std::shared_ptr<PyGroup> group_;
};

std::unique_ptr<PyWorld> join(const std::string& backend, double timeout_s) {
  COHORT_CHECK_ARG(timeout_s > 0, "cohort.init: timeout must be > 0 seconds, got ", timeout_s);
  comm::JoinOptions o;
  o.backend = backend;
  o.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000.0 + 0.5));
  std::unique_ptr<comm::World> w;
  {
    py::gil_scoped_release nogil;  // waits up to `timeout` for every rank to arrive
    w = comm::join_world(rendezvous::snapshot_environment(), o);
  }
  return std::make_unique<PyWorld>(std::move(w), backend);
}

}  // namespace

void register_world(py::module_& m) {
  m.def("available_backends", &comm::available_backends,
        "The backends this build has: 'native', and 'mpi' when built with MPI.");
  m.def("join", &join, py::arg("backend") = "native", py::arg("timeout") = 300.0,
        "Join the job this process was launched into (cohort run, torchrun, mpirun, srun); a "
        "process without launcher variables is a world of one. Use cohort.init().");
  py::class_<PyWorld>(m, "World", "This process's place in the job; see cohort.init().")
      .def_property_readonly("rank", [](const PyWorld& w) { return w.world("rank").rank; })
      .def_property_readonly("size", [](const PyWorld& w) { return w.world("size").size; })
      .def_property_readonly("local_rank",
                             [](const PyWorld& w) { return w.world("local_rank").local_rank; })
      .def_property_readonly("local_size",
                             [](const PyWorld& w) { return w.world("local_size").local_size; })
      .def_property_readonly("backend", &PyWorld::backend)
      .def_property_readonly("group", &PyWorld::group, "The ProcessGroup of every rank.")
      .def_property_readonly("closed", &PyWorld::closed)
      .def("close", &PyWorld::close, "Leave the world: free the connections and the store.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyWorld& w, py::args) { w.close(); })
      .def("__repr__", [](const PyWorld& w) -> std::string {
        if (w.closed()) return "<cohort.World (closed)>";
        const comm::World& x = w.world("__repr__");
        return detail::str("<cohort.World rank ", x.rank, " of ", x.size, " (", w.backend(), ")>");
      });
}

}  // namespace cohort::pybind
