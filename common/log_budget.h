// LogBudget: lets through at most N log lines of one kind per time window, and counts
// the rest, so that a repeated error (a folder of 100k bad files under on_error: skip)
// cannot flood the log. The caller logs when Allow says so, with the count of lines
// held back since the last one it logged.
// Thread-safety: every method may be called from any thread.
#ifndef EMBER_COMMON_LOG_BUDGET_H_
#define EMBER_COMMON_LOG_BUDGET_H_

#include <cstdint>

#include "common/mutex.h"

namespace ember {

class LogBudget {
 public:
  // `per_window` lines (at least 1) in each `window_micros`.
  LogBudget(uint32_t per_window, uint64_t window_micros);

  // True if a line may be logged at `now_micros` (a steady clock); *held_back is then
  // the number of lines refused since the last one allowed (0 if none).
  bool Allow(uint64_t now_micros, uint64_t* held_back);

  // The lines refused since the last one allowed, now counted as reported (for a last
  // summary line when the kind of line ends).
  uint64_t TakeHeldBack();

 private:
  const uint32_t per_window_;
  const uint64_t window_micros_;
  Mutex mu_;
  uint64_t window_start_ GUARDED_BY(mu_) = 0;
  uint32_t used_ GUARDED_BY(mu_) = 0;  // lines allowed in this window
  uint64_t held_back_ GUARDED_BY(mu_) = 0;
  bool started_ GUARDED_BY(mu_) = false;
};

}  // namespace ember

#endif  // EMBER_COMMON_LOG_BUDGET_H_
