#include "common/futex.h"

#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

namespace ember {
namespace {

using Clock = std::chrono::steady_clock;

TEST_CASE("FutexWait returns at once when the word differs") {
  std::atomic<uint32_t> word{1};
  const auto start = Clock::now();
  FutexWait(&word, 0, std::chrono::seconds(10));
  CHECK(Clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("FutexWait times out, also for a zero or negative timeout") {
  std::atomic<uint32_t> word{0};
  auto start = Clock::now();
  FutexWait(&word, 0, std::chrono::milliseconds(30));
  const auto slept = Clock::now() - start;
  CHECK(slept >= std::chrono::milliseconds(25));
  CHECK(slept < std::chrono::seconds(5));
  start = Clock::now();
  FutexWait(&word, 0, std::chrono::nanoseconds(0));
  FutexWait(&word, 0, std::chrono::milliseconds(-5));
  CHECK(Clock::now() - start < std::chrono::seconds(1));
}

TEST_CASE("FutexWakeAll wakes every sleeper") {
  std::atomic<uint32_t> word{0};
  std::atomic<int> woken{0};
  std::vector<std::thread> sleepers;
  for (int i = 0; i < 3; ++i) {
    sleepers.emplace_back([&] {
      while (word.load() == 0) FutexWait(&word, 0, std::chrono::seconds(30));
      ++woken;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = Clock::now();
  word.store(1);
  FutexWakeAll(&word);
  for (std::thread& sleeper : sleepers) sleeper.join();
  CHECK(woken == 3);
  CHECK(Clock::now() - start < std::chrono::seconds(10));
}

}  // namespace
}  // namespace ember
