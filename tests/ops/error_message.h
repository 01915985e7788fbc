#pragma once
// Helpers for asserting on what a user would read: the message of the InvalidArgument an op
// throws, and a substring check that prints the whole message when it fails.
#include <gtest/gtest.h>

#include <string>

#include "cohort/core/error.h"

namespace cohort::testing {

// The message of the InvalidArgument that fn throws, or a marker when it throws nothing or
// something else.
template <typename Fn>
std::string invalid_argument_message(Fn&& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<other exception: ") + e.what() + ">";
  }
  return "<no exception>";
}

inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

}  // namespace cohort::testing
