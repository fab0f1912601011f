// Test helper: the message (without c10's backtrace) of the c10::Error that a call
// throws, or "" if it throws none.
#ifndef EMBER_SDK_SYNC_ERROR_OF_H_
#define EMBER_SDK_SYNC_ERROR_OF_H_

#include <functional>
#include <string>

namespace ember::sdk {

std::string ErrorOf(const std::function<void()>& f);

}  // namespace ember::sdk

#endif  // EMBER_SDK_SYNC_ERROR_OF_H_
