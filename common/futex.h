// Sleeping and waking on a 32-bit word in memory shared between processes (Linux
// futexes on a shared mapping, so not FUTEX_PRIVATE): the ring's slot states and the
// shared-memory communicator's barrier generation both sleep on one.
#ifndef EMBER_COMMON_FUTEX_H_
#define EMBER_COMMON_FUTEX_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ember {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "a futex word is a plain lock-free 32-bit word");

// Sleeps while *word == expected, at most `timeout` (none below zero). Returns on a
// wake, a timeout, a signal, a spurious wake-up or if the value already differs: the
// caller re-checks the word.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout);

// Wakes every sleeper on `word`. Never blocks.
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace ember

#endif  // EMBER_COMMON_FUTEX_H_
