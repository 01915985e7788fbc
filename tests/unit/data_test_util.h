#pragma once
// Helpers shared by the data tests: an error check that asserts the exception type and the
// words its message must contain (temporary directories and whole-file reads/writes are in
// tests/support/files.h).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace cohort::data {

// fn must throw exactly E (or a subclass) with every string of `parts` in its message.
template <typename E>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception thrown";
  } catch (const E& e) {
    std::string msg = e.what();
    for (const auto& p : parts) {
      EXPECT_NE(msg.find(p), std::string::npos) << "message lacks \"" << p << "\": " << msg;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

}  // namespace cohort::data
