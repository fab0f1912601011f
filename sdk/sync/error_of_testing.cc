#include "sdk/sync/error_of_testing.h"

#include <exception>
#include <thread>

#include <c10/util/Exception.h>

namespace ember::sdk {

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

std::vector<std::string> ErrorsOfThreads(int n, const std::function<void(int)>& f) {
  std::vector<std::string> errors(n);
  RunOnThreads(n, [&](int i) { errors[i] = ErrorOf([&] { f(i); }); });
  return errors;
}

void RunOnThreads(int n, const std::function<void(int)>& f) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        f(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace ember::sdk
