#include "python/src/errors.h"

#include <string>

#include "cohort/comm/options.h"
#include "cohort/core/error.h"
#include "cohort/net/auth.h"

namespace py = pybind11;

namespace cohort::pybind {
namespace {

// The exception classes, created once when the module loads and never freed: the translator
// may run until the interpreter exits.
struct ErrorClasses {
  PyObject* error = nullptr;
  PyObject* invalid = nullptr;
  PyObject* mismatch = nullptr;
  PyObject* io = nullptr;
  PyObject* auth = nullptr;
  PyObject* timeout = nullptr;
  PyObject* internal = nullptr;
};

ErrorClasses& classes() {
  static ErrorClasses c;
  return c;
}

// A new exception class cohort.<name> deriving from `bases`, added to `m`.
PyObject* make_class(py::module_& m, const char* name, const char* doc,
                     std::initializer_list<PyObject*> bases) {
  py::tuple t(bases.size());
  size_t i = 0;
  for (PyObject* b : bases) t[i++] = py::reinterpret_borrow<py::object>(b);
  std::string qualified = std::string("cohort.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, t.ptr(), nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(cls));
  return cls;
}

void translate(std::exception_ptr p) {
  const ErrorClasses& c = classes();
  // Most derived first: a C++ catch takes the first clause that matches.
  try {
    std::rethrow_exception(p);
  } catch (const comm::CollectiveMismatch& e) {
    PyErr_SetString(c.mismatch, e.what());
  } catch (const InvalidArgument& e) {
    PyErr_SetString(c.invalid, e.what());
  } catch (const net::AuthRefused& e) {
    PyErr_SetString(c.auth, e.what());
  } catch (const IoError& e) {
    PyErr_SetString(c.io, e.what());
  } catch (const Timeout& e) {
    PyErr_SetString(c.timeout, e.what());
  } catch (const Internal& e) {
    PyErr_SetString(c.internal, e.what());
  } catch (const Error& e) {
    PyErr_SetString(c.error, e.what());
  }
  // Anything else propagates to pybind11's own translators (std::exception -> RuntimeError).
}

}  // namespace

void register_errors(py::module_& m) {
  ErrorClasses& c = classes();
  c.error = make_class(m, "Error", "Base of every cohort error.", {PyExc_RuntimeError});
  c.invalid = make_class(m, "InvalidArgument", "The caller passed something wrong.",
                         {c.error, PyExc_ValueError});
  c.mismatch = make_class(m, "CollectiveMismatch",
                          "Ranks called different collectives (or different counts, dtypes, "
                          "ops or roots) at the same point.",
                          {c.invalid});
  c.io = make_class(m, "IoError", "A file or a peer failed; rebuild the world to recover.",
                    {c.error, PyExc_OSError});
  c.auth = make_class(m, "AuthRefused", "A peer refused this process's job secret.", {c.io});
  c.timeout = make_class(m, "Timeout", "A blocking wait passed its deadline.",
                         {c.error, PyExc_TimeoutError});
  c.internal = make_class(m, "Internal", "A bug in cohort: please report it.", {c.error});
  py::register_exception_translator(&translate);
}

}  // namespace cohort::pybind
