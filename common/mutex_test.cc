#include "common/mutex.h"

#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

namespace ember {
namespace {

struct Box {
  Mutex mu;
  CondVar changed;
  int value GUARDED_BY(mu) = 0;
};

TEST_CASE("a CondVar wakes the waiter that holds the Mutex once the value changes") {
  Box box;
  std::thread setter([&box] {
    MutexLock lock(&box.mu);
    box.value = 7;
    box.changed.SignalAll();
  });
  int seen = 0;
  {
    MutexLock lock(&box.mu);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (box.value == 0 && box.changed.WaitUntil(&box.mu, deadline)) {
    }
    seen = box.value;
  }
  setter.join();
  CHECK(seen == 7);
}

TEST_CASE("CondVar::WaitFor returns false once its timeout passes") {
  Box box;
  MutexLock lock(&box.mu);
  const auto start = std::chrono::steady_clock::now();
  bool signalled = true;
  while (signalled) signalled = box.changed.WaitFor(&box.mu, std::chrono::milliseconds(20));
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(20));
  box.value = 1;  // still held after the wait
  CHECK(box.value == 1);
}

TEST_CASE("MutexUnlock releases the Mutex for its scope and takes it back") {
  Box box;
  MutexLock lock(&box.mu);
  {
    MutexUnlock unlocked(&box.mu);
    std::thread other([&box] {
      MutexLock inner(&box.mu);  // would deadlock if the Mutex were still held
      box.value = 3;
    });
    other.join();
  }
  CHECK(box.value == 3);
}

}  // namespace
}  // namespace ember
