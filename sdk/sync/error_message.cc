#include "sdk/sync/error_message.h"

#include <c10/util/Exception.h>

namespace ember::sdk {

std::string ErrorMessage(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

}  // namespace ember::sdk
