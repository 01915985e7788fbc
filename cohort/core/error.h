#pragma once
// Typed errors at the API boundary (DESIGN convention 5). The library never exits or aborts:
// it throws one of these, and the CLI turns them into a message and a non-zero exit status.
#include <sstream>
#include <stdexcept>
#include <string>

namespace cohort {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// The caller passed something wrong: a shape, a config key, a file that is not what it claims.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
// A file or a peer failed us. Recoverable by retrying or rebuilding the communicator.
class IoError : public Error {
 public:
  using Error::Error;
};
// A blocking wait passed its deadline.
class Timeout : public Error {
 public:
  using Error::Error;
};
// A bug in cohort: an invariant that should have held did not.
class Internal : public Error {
 public:
  using Error::Error;
};

namespace detail {
// Streams every argument into one string: str("shape ", a, " vs ", b).
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace cohort

// COHORT_CHECK(cond, ErrorType, message parts...): throws ErrorType("message") when cond is false.
#define COHORT_CHECK_T(cond, ErrorType, ...)                          \
  do {                                                                \
    if (!(cond)) throw ErrorType(::cohort::detail::str(__VA_ARGS__)); \
  } while (0)
#define COHORT_CHECK_ARG(cond, ...) COHORT_CHECK_T(cond, ::cohort::InvalidArgument, __VA_ARGS__)
#define COHORT_CHECK_IO(cond, ...) COHORT_CHECK_T(cond, ::cohort::IoError, __VA_ARGS__)
#define COHORT_INTERNAL(cond, ...)                                                              \
  COHORT_CHECK_T(cond, ::cohort::Internal, "internal error at ", __FILE__, ":", __LINE__, ": ", \
                 __VA_ARGS__)
