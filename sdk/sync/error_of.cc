#include "sdk/sync/error_of.h"

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

}  // namespace ember::sdk
