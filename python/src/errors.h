#pragma once
// cohort's C++ errors (core/error.h) as Python exceptions of matching types, with the same
// messages. Each class derives from cohort.Error (a RuntimeError) and from the built-in
// exception a Python user would catch for that failure:
//   Error(RuntimeError)
//     InvalidArgument(Error, ValueError)      the caller passed something wrong
//       CollectiveMismatch(InvalidArgument)   ranks called different collectives
//     IoError(Error, OSError)                 a file or a peer failed us
//       AuthRefused(IoError)                  a peer refused the job secret
//     Timeout(Error, TimeoutError)            a blocking wait passed its deadline
//     Internal(Error)                         a bug in cohort
// pybind11's translator maps a C++ exception to the most derived of these.
#include <pybind11/pybind11.h>

namespace cohort::pybind {

// Creates the classes in `m` and registers the translator.
void register_errors(pybind11::module_& m);

}  // namespace cohort::pybind
