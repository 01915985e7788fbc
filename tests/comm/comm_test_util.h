#pragma once
// Helpers for comm tests that run ranks as threads of one process (DESIGN convention 8).
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cohort/comm/types.h"
#include "cohort/core/error.h"
#include "tests/support/errors.h"

namespace cohort::comm::testing {

// Runs fn(rank) on `size` threads and joins them. An exception escaping a rank fails the test
// with the rank and the message (other ranks are expected to fail on their own deadlines).
inline void run_ranks(int size, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) {
    if (!errors[size_t(r)]) continue;
    try {
      std::rethrow_exception(errors[size_t(r)]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << " threw: " << e.what();
    }
  }
}

using cohort::testing::error_of;  // tests/support/errors.h

inline std::chrono::steady_clock::time_point in_ms(int ms) {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace cohort::comm::testing
