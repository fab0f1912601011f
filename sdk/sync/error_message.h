// The message of an exception for an error report: c10::Error's without its backtrace,
// any other's what(). Shared by the communicators, DataParallel and the sync test
// workers.
#ifndef EMBER_SDK_SYNC_ERROR_MESSAGE_H_
#define EMBER_SDK_SYNC_ERROR_MESSAGE_H_

#include <exception>
#include <string>

namespace ember::sdk {

std::string ErrorMessage(const std::exception& e);

}  // namespace ember::sdk

#endif  // EMBER_SDK_SYNC_ERROR_MESSAGE_H_
