#pragma once
// Futex waits and wakes on a 32-bit word that may live in memory shared between processes
// (so never FUTEX_PRIVATE). Linux only, like the shm transport that uses them.
#include <atomic>
#include <chrono>
#include <cstdint>

namespace cohort::comm::transport {

// Sleeps while *word == expected, at most until `until` (or a spurious wake-up). Returns at
// once when the word already differs.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected,
                std::chrono::steady_clock::time_point until);
// Wakes every thread sleeping on *word, in any process.
void futex_wake_all(std::atomic<uint32_t>* word);

}  // namespace cohort::comm::transport
