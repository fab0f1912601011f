// How ember::Status crosses Cap'n Proto RPC (internal to the daemon's and the SDK's RPC
// adapters): as a kj::Exception whose description is "<status code name>: <message>".
#ifndef EMBER_COMMON_RPC_STATUS_H_
#define EMBER_COMMON_RPC_STATUS_H_

#include <kj/async.h>
#include <kj/exception.h>

#include <functional>
#include <string>
#include <utility>

#include "ember/status.h"

namespace ember::rpc_status {

// `status` must not be OK. kResourceExhausted travels as OVERLOADED, the rest as FAILED.
kj::Exception ToException(const Status& status);

// The links a call went over, for what a lost connection says: `next` is the one the
// caller called over ("emberd at /run/ember/emberd.sock", "coordinator 10.0.0.1:7100"),
// `beyond` what lies past it when the callee forwards the call ("the job's coordinator
// 10.0.0.1:7100"; empty: unknown).
struct Link {
  std::string next = "emberd";
  std::string beyond;
};

// Recovers the code and message; an exception that did not come from ToException (a
// dropped connection, a bug) becomes kUnavailable / kInternal with its description.
// A lost connection names the link that failed: "connection to <next> lost: ..." when it
// was the caller's own, "<next> lost its connection to <beyond>: ..." when the callee
// forwarded it (its description carries a "remote exception: " prefix per hop).
Status FromException(const kj::Exception& exception, const Link& link = {});

// The Status of a description "<status code name>: <message>" (Status::ToString, as an
// error travels in a struct field rather than as an exception); kInternal with the whole
// text when it names no code.
Status FromDescription(const std::string& text);

// For RPC servers: throws ToException(status) (`status` must not be OK).
[[noreturn]] inline void Throw(const Status& status) {
  kj::throwFatalException(ToException(status));
}

// The value of `result`, or throws its status.
template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) Throw(result.status());
  return std::move(result).value();
}

// A kj::TaskSet's ErrorHandler that hands each failed task's Status (FromException) to
// `report` (a log line, typically), so an owner of background tasks needs no class of its
// own for it.
class ReportFailures final : public kj::TaskSet::ErrorHandler {
 public:
  explicit ReportFailures(std::function<void(const Status&)> report)
      : report_(std::move(report)) {}
  void taskFailed(kj::Exception&& e) override { report_(FromException(e)); }

 private:
  const std::function<void(const Status&)> report_;
};

}  // namespace ember::rpc_status

#endif  // EMBER_COMMON_RPC_STATUS_H_
