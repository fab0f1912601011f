#include "common/log_budget.h"

#include <algorithm>

namespace ember {

LogBudget::LogBudget(uint32_t per_window, uint64_t window_micros)
    : per_window_(std::max<uint32_t>(per_window, 1)), window_micros_(window_micros) {}

bool LogBudget::Allow(uint64_t now_micros, uint64_t* held_back) {
  MutexLock lock(&mu_);
  if (!started_ || now_micros >= window_start_ + window_micros_) {
    started_ = true;
    window_start_ = now_micros;
    used_ = 0;
  }
  if (used_ >= per_window_) {
    ++held_back_;
    return false;
  }
  ++used_;
  *held_back = held_back_;
  held_back_ = 0;
  return true;
}

uint64_t LogBudget::TakeHeldBack() {
  MutexLock lock(&mu_);
  const uint64_t held = held_back_;
  held_back_ = 0;
  return held;
}

}  // namespace ember
