#pragma once
// The message of the exception a call throws, for tests that check what an error names.
#include <gtest/gtest.h>

#include <exception>
#include <string>

namespace cohort::testing {

// Calls fn and returns the message of the exception of type E it throws ("" and a test failure
// if it throws nothing or something else).
template <typename E, typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

}  // namespace cohort::testing
