#pragma once
// Typed errors at the API boundary (DESIGN convention 5). The library never exits or aborts:
// it throws one of these, and the CLI turns them into a message and a non-zero exit status.
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>

namespace cohort {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // An error of this same type with `context` in front of the message (rethrow_with_context).
  virtual std::exception_ptr with_context(const std::string& context) const {
    return std::make_exception_ptr(Error(context + what()));
  }
};

// Base of each error type: gives it with_context() returning its own type. An error type of
// your own derives through it too (class MyError : public ErrorKind<MyError, IoError>), or
// rethrow_with_context turns it into its nearest cohort base.
template <typename Self, typename Base>
class ErrorKind : public Base {
 public:
  using Base::Base;
  std::exception_ptr with_context(const std::string& context) const override {
    return std::make_exception_ptr(Self(context + this->what()));
  }
};

// The caller passed something wrong: a shape, a config key, a file that is not what it claims.
class InvalidArgument : public ErrorKind<InvalidArgument, Error> {
 public:
  using ErrorKind::ErrorKind;
};
// A file or a peer failed us. Recoverable by retrying or rebuilding the communicator.
class IoError : public ErrorKind<IoError, Error> {
 public:
  using ErrorKind::ErrorKind;
};
// A blocking wait passed its deadline.
class Timeout : public ErrorKind<Timeout, Error> {
 public:
  using ErrorKind::ErrorKind;
};
// A bug in cohort: an invariant that should have held did not.
class Internal : public ErrorKind<Internal, Error> {
 public:
  using ErrorKind::ErrorKind;
};

// Rethrows `e` as the same error type with `context` in front of its message, so that a caller
// can still catch IoError or Timeout (a dead or stalled peer) and learn where it struck. An
// exception that is not a cohort::Error becomes one; anything else passes unchanged.
[[noreturn]] inline void rethrow_with_context(std::exception_ptr e, const std::string& context) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    std::rethrow_exception(x.with_context(context));
  } catch (const std::exception& x) {
    throw Error(context + x.what());
  }
}

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
