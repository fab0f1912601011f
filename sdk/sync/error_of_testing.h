// Test helpers: the message (without c10's backtrace) of the c10::Error that a call
// throws, or "" if it throws none; the same for calls run side by side, one thread each
// (ranks of a group meeting in one process); and such calls' first exception, rethrown.
#ifndef EMBER_SDK_SYNC_ERROR_OF_TESTING_H_
#define EMBER_SDK_SYNC_ERROR_OF_TESTING_H_

#include <functional>
#include <string>
#include <vector>

namespace ember::sdk {

std::string ErrorOf(const std::function<void()>& f);

// Runs f(0) .. f(n-1) each on its own thread, joins them, and returns ErrorOf of each.
std::vector<std::string> ErrorsOfThreads(int n, const std::function<void(int)>& f);

// Runs f(0) .. f(n-1) each on its own thread, joins them, and rethrows the exception of
// the lowest-numbered one that threw, if any.
void RunOnThreads(int n, const std::function<void(int)>& f);

}  // namespace ember::sdk

#endif  // EMBER_SDK_SYNC_ERROR_OF_TESTING_H_
