// The Python methods of cohort.ProcessGroup: each takes its buffers (buffer.h), checks what
// only the caller can get wrong (sizes, dtypes) with messages naming the argument and the
// rank, and runs the comm::ProcessGroup operation with the GIL released, synchronously or as
// a Work that holds the buffers.
#include <pybind11/stl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <string>

#include "cohort/core/error.h"
#include "python/src/group.h"

namespace py = pybind11;

namespace cohort::pybind {
namespace {

using BufferPtr = std::shared_ptr<BufferArg>;
using OptSeconds = std::optional<double>;
using OptDType = std::optional<std::string>;

std::chrono::milliseconds to_ms(OptSeconds s, const char* op) {
  if (!s) return std::chrono::milliseconds{0};  // 0: the communicator's timeout
  COHORT_CHECK_ARG(*s >= 0, op, ": timeout must be >= 0 seconds, got ", *s);
  return std::chrono::milliseconds(static_cast<long long>(*s * 1000.0 + 0.5));
}

std::optional<comm::DType> opt_dtype(const OptDType& d, const char* op) {
  if (!d) return std::nullopt;
  return parse_dtype(*d, op);
}

// op= as a cohort.ReduceOp or its name, any case ("sum", "AVG", "product").
comm::ReduceOp parse_op(py::handle op, const char* where) {
  if (py::isinstance<comm::ReduceOp>(op)) return op.cast<comm::ReduceOp>();
  COHORT_CHECK_ARG(py::isinstance<py::str>(op), where, ": op must be a cohort.ReduceOp or one of ",
                   "'sum', 'avg', 'min', 'max', 'prod'; got ",
                   std::string(py::str(py::type::handle_of(op).attr("__name__"))));
  std::string s = op.cast<std::string>();
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  for (int i = 0; i < comm::kNumReduceOps; ++i)
    if (s == comm::reduce_op_name(comm::ReduceOp(i))) return comm::ReduceOp(i);
  if (s == "product") return comm::ReduceOp::prod;
  throw InvalidArgument(
      detail::str(where, ": unknown op '", s, "'; one of 'sum', 'avg', 'min', 'max', 'prod'"));
}

void check_same_dtype(const BufferArg& a, const BufferArg& b, const char* op, int rank) {
  COHORT_CHECK_ARG(a.dtype() == b.dtype(), op, " on rank ", rank, ": argument 'input' is ",
                   comm::dtype_short_name(a.dtype()), " but 'output' is ",
                   comm::dtype_short_name(b.dtype()), "; both must have the same dtype");
}

// Runs an operation synchronously (None) or asynchronously (a Work holding `keep`), with the
// GIL released while it blocks or is issued.
template <typename Sync, typename Async>
py::object run(bool async_op, std::vector<BufferPtr> keep, Sync sync, Async async) {
  if (!async_op) {
    {
      py::gil_scoped_release nogil;
      sync();
    }
    return py::none();
  }
  comm::Work w;
  {
    py::gil_scoped_release nogil;
    w = async();
  }
  return py::cast(std::make_unique<PyWork>(std::move(w), std::move(keep)));
}

py::object allreduce(PyGroup& g, py::handle tensor, py::handle op, bool async_op, OptSeconds t,
                     const OptDType& dt) {
  comm::ProcessGroup& pg = g.pg("allreduce");
  BufferPtr b =
      BufferArg::from(tensor, "allreduce", "tensor", Access::kWrite, opt_dtype(dt, "allreduce"));
  comm::AllreduceOptions o{.output = b->data(),
                           .count = b->count(),
                           .dtype = b->dtype(),
                           .op = parse_op(op, "allreduce"),
                           .timeout = to_ms(t, "allreduce")};
  return run(
      async_op, {b}, [&] { pg.allreduce(o); }, [&] { return pg.allreduce_async(o); });
}

py::object broadcast(PyGroup& g, py::handle tensor, int root, bool async_op, OptSeconds t,
                     const OptDType& dt) {
  comm::ProcessGroup& pg = g.pg("broadcast");
  COHORT_CHECK_ARG(root >= 0 && root < pg.size(), "broadcast on rank ", pg.rank(), ": root ", root,
                   " is not a rank of this group of ", pg.size());
  BufferPtr b =
      BufferArg::from(tensor, "broadcast", "tensor", Access::kWrite, opt_dtype(dt, "broadcast"));
  comm::BroadcastOptions o{.buffer = b->data(),
                           .count = b->count(),
                           .dtype = b->dtype(),
                           .root = root,
                           .timeout = to_ms(t, "broadcast")};
  return run(
      async_op, {b}, [&] { pg.broadcast(o); }, [&] { return pg.broadcast_async(o); });
}

// output: size * count elements; input: count elements, or None when this rank's block is
// already in place at output[rank * count].
py::object allgather(PyGroup& g, py::handle output, py::handle input, bool async_op, OptSeconds t,
                     const OptDType& dt) {
  comm::ProcessGroup& pg = g.pg("allgather");
  const int n = pg.size();
  BufferPtr out =
      BufferArg::from(output, "allgather", "output", Access::kWrite, opt_dtype(dt, "allgather"));
  std::vector<BufferPtr> keep{out};
  comm::AllgatherOptions o{
      .output = out->data(), .dtype = out->dtype(), .timeout = to_ms(t, "allgather")};
  if (input.is_none()) {
    COHORT_CHECK_ARG(out->count() % n == 0, "allgather on rank ", pg.rank(),
                     ": argument 'output' has ", out->count(),
                     " elements, not a multiple of the group size ", n);
    o.count = out->count() / n;
  } else {
    BufferPtr in =
        BufferArg::from(input, "allgather", "input", Access::kRead, opt_dtype(dt, "allgather"));
    check_same_dtype(*in, *out, "allgather", pg.rank());
    COHORT_CHECK_ARG(out->count() == n * in->count(), "allgather on rank ", pg.rank(),
                     ": argument 'output' has ", out->count(),
                     " elements, expected size x count = ", n, " x ", in->count(), " = ",
                     n * in->count(), " ('input' has ", in->count(), ")");
    o.input = in->data();
    o.count = in->count();
    keep.push_back(in);
  }
  return run(
      async_op, keep, [&] { pg.allgather(o); }, [&] { return pg.allgather_async(o); });
}

// input: size * count elements; block k, reduced over the ranks, lands in rank k's output.
py::object reduce_scatter(PyGroup& g, py::handle output, py::handle input, py::handle op,
                          bool async_op, OptSeconds t, const OptDType& dt) {
  comm::ProcessGroup& pg = g.pg("reduce_scatter");
  const int n = pg.size();
  BufferPtr out = BufferArg::from(output, "reduce_scatter", "output", Access::kWrite,
                                  opt_dtype(dt, "reduce_scatter"));
  BufferPtr in = BufferArg::from(input, "reduce_scatter", "input", Access::kRead,
                                 opt_dtype(dt, "reduce_scatter"));
  check_same_dtype(*in, *out, "reduce_scatter", pg.rank());
  COHORT_CHECK_ARG(in->count() == n * out->count(), "reduce_scatter on rank ", pg.rank(),
                   ": argument 'input' has ", in->count(), " elements, expected size x count = ", n,
                   " x ", out->count(), " = ", n * out->count(), " ('output' has ", out->count(),
                   ")");
  comm::ReduceScatterOptions o{.input = in->data(),
                               .output = out->data(),
                               .count = out->count(),
                               .dtype = out->dtype(),
                               .op = parse_op(op, "reduce_scatter"),
                               .timeout = to_ms(t, "reduce_scatter")};
  return run(
      async_op, {out, in}, [&] { pg.reduce_scatter(o); },
      [&] { return pg.reduce_scatter_async(o); });
}

void check_peer(const comm::ProcessGroup& pg, int peer, const char* op) {
  COHORT_CHECK_ARG(peer >= 0 && peer < pg.size() && peer != pg.rank(), op, " on rank ", pg.rank(),
                   ": peer ", peer, " is not another rank of this group of ", pg.size());
}

py::object send(PyGroup& g, py::handle tensor, int peer, uint32_t tag, bool async_op, OptSeconds t,
                const OptDType& dt) {
  comm::ProcessGroup& pg = g.pg("send");
  check_peer(pg, peer, "send");
  BufferPtr b = BufferArg::from(tensor, "send", "tensor", Access::kRead, opt_dtype(dt, "send"));
  comm::SendOptions o{.buffer = b->data(),
                      .count = b->count(),
                      .dtype = b->dtype(),
                      .peer = peer,
                      .tag = tag,
                      .timeout = to_ms(t, "send")};
  return run(
      async_op, {b}, [&] { pg.send(o); }, [&] { return pg.send_async(o); });
}

py::object recv(PyGroup& g, py::handle tensor, int peer, uint32_t tag, bool async_op, OptSeconds t,
                const OptDType& dt) {
  comm::ProcessGroup& pg = g.pg("recv");
  check_peer(pg, peer, "recv");
  BufferPtr b = BufferArg::from(tensor, "recv", "tensor", Access::kWrite, opt_dtype(dt, "recv"));
  comm::RecvOptions o{.buffer = b->data(),
                      .count = b->count(),
                      .dtype = b->dtype(),
                      .peer = peer,
                      .tag = tag,
                      .timeout = to_ms(t, "recv")};
  return run(
      async_op, {b}, [&] { pg.recv(o); }, [&] { return pg.recv_async(o); });
}

void barrier(PyGroup& g, OptSeconds t) {
  comm::ProcessGroup& pg = g.pg("barrier");
  std::chrono::milliseconds ms = to_ms(t, "barrier");
  py::gil_scoped_release nogil;
  pg.barrier(ms);
}

// A sub-group sharing g's session, or None for a rank outside it.
py::object wrap(const PyGroup& g, std::shared_ptr<comm::ProcessGroup> sub) {
  if (!sub) return py::none();
  return py::cast(PyGroup::make(std::move(sub), g.session()));
}

py::object new_group(PyGroup& g, const std::vector<int>& ranks) {
  comm::ProcessGroup& pg = g.pg("new_group");
  std::shared_ptr<comm::ProcessGroup> sub;
  {
    py::gil_scoped_release nogil;
    sub = pg.new_group(ranks);
  }
  return wrap(g, std::move(sub));
}

py::object split(PyGroup& g, int color, std::optional<int> key) {
  comm::ProcessGroup& pg = g.pg("split");
  std::shared_ptr<comm::ProcessGroup> sub;
  {
    py::gil_scoped_release nogil;
    sub = pg.split(color, key.value_or(pg.rank()));
  }
  return wrap(g, std::move(sub));
}

void register_work(py::module_& m) {
  py::class_<PyWork>(m, "Work", "Handle of an asynchronous operation (async_op=True).")
      .def("wait", &PyWork::wait, py::arg("timeout") = py::none(),
           "Block until done (GIL released) and raise the operation's error; timeout in "
           "seconds raises cohort.Timeout if it is not done by then. Returns True.")
      .def("is_completed", &PyWork::is_completed, "True once done, successfully or not.")
      .def_property_readonly("name", &PyWork::name)
      .def("__repr__", [](const PyWork& w) {
        return "<cohort.Work " + w.name() + (w.is_completed() ? " done>" : " running>");
      });
}

}  // namespace

void register_group(py::module_& m) {
  py::enum_<comm::ReduceOp>(m, "ReduceOp")
      .value("SUM", comm::ReduceOp::sum)
      .value("AVG", comm::ReduceOp::avg)
      .value("MIN", comm::ReduceOp::min)
      .value("MAX", comm::ReduceOp::max)
      .value("PROD", comm::ReduceOp::prod);
  register_work(m);
  const auto sum = comm::ReduceOp::sum;
  const auto no = py::none();
  py::class_<PyGroup, std::shared_ptr<PyGroup>>(m, "ProcessGroup")
      .def_property_readonly("rank", [](const PyGroup& g) { return g.pg("rank").rank(); })
      .def_property_readonly("size", [](const PyGroup& g) { return g.pg("size").size(); })
      .def_property_readonly("backend",
                             [](const PyGroup& g) { return g.pg("backend").backend_name(); })
      .def("allreduce", &allreduce, py::arg("tensor"), py::arg("op") = sum, py::kw_only(),
           py::arg("async_op") = false, py::arg("timeout") = no, py::arg("dtype") = no)
      .def("broadcast", &broadcast, py::arg("tensor"), py::arg("root") = 0, py::kw_only(),
           py::arg("async_op") = false, py::arg("timeout") = no, py::arg("dtype") = no)
      .def("allgather", &allgather, py::arg("output"), py::arg("input") = no, py::kw_only(),
           py::arg("async_op") = false, py::arg("timeout") = no, py::arg("dtype") = no)
      .def("reduce_scatter", &reduce_scatter, py::arg("output"), py::arg("input"),
           py::arg("op") = sum, py::kw_only(), py::arg("async_op") = false, py::arg("timeout") = no,
           py::arg("dtype") = no)
      .def("send", &send, py::arg("tensor"), py::arg("peer"), py::arg("tag") = 0, py::kw_only(),
           py::arg("async_op") = false, py::arg("timeout") = no, py::arg("dtype") = no)
      .def("recv", &recv, py::arg("tensor"), py::arg("peer"), py::arg("tag") = 0, py::kw_only(),
           py::arg("async_op") = false, py::arg("timeout") = no, py::arg("dtype") = no)
      .def("barrier", &barrier, py::kw_only(), py::arg("timeout") = no)
      .def("new_group", &new_group, py::arg("ranks"))
      .def("split", &split, py::arg("color"), py::arg("key") = no)
      .def("__repr__", [](const PyGroup& g) -> std::string {
        if (!g.open()) return "<cohort.ProcessGroup (closed)>";
        const comm::ProcessGroup& pg = g.pg("__repr__");
        return detail::str("<cohort.ProcessGroup rank ", pg.rank(), " of ", pg.size(), " (",
                           pg.backend_name(), ")>");
      });
}

}  // namespace cohort::pybind
