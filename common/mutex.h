// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with clang's
// thread-safety annotations (common/thread_annotations.h), so that what a mutex guards
// is checked by the compiler rather than stated in comments.
//
//   Mutex mu_;
//   CondVar changed_;
//   bool ready_ GUARDED_BY(mu_) = false;
//
//   void Wait() EXCLUDES(mu_) {
//     MutexLock lock(&mu_);
//     while (!ready_) changed_.Wait(&mu_);
//   }
//
// Waits are loops over the condition, written where the guarded members are visible to
// the analysis (a predicate lambda would be analysed as a function that holds nothing).
#ifndef EMBER_COMMON_MUTEX_H_
#define EMBER_COMMON_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.h"

namespace ember {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Releases `mu` (held by a MutexLock of the enclosing scope) from construction to
// destruction: for work that must not run under the lock, such as a call out.
class SCOPED_CAPABILITY MutexUnlock {
 public:
  explicit MutexUnlock(Mutex* mu) RELEASE(mu) : mu_(mu) { mu_->Unlock(); }
  // RELEASE, as clang wants it on every scoped capability's destructor: it undoes what
  // the constructor did (here: takes `mu` again).
  ~MutexUnlock() RELEASE() { mu_->Lock(); }
  MutexUnlock(const MutexUnlock&) = delete;
  MutexUnlock& operator=(const MutexUnlock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable waited on with a Mutex held. Wakeups may be spurious: wait in a
// loop over the condition.
class CondVar {
 public:
  // Releases `mu`, waits for a signal, takes `mu` again.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // As Wait, until `deadline` at the latest; false once it has passed.
  template <class Clock, class Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline)
      REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool signalled = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return signalled;
  }
  // As Wait, for `timeout` at the most; false once it has passed.
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout) REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace ember

#endif  // EMBER_COMMON_MUTEX_H_
