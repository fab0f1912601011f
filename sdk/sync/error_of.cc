#include "sdk/sync/error_of.h"

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
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] { errors[i] = ErrorOf([&] { f(i); }); });
  }
  for (std::thread& thread : threads) thread.join();
  return errors;
}

}  // namespace ember::sdk
