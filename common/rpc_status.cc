#include "common/rpc_status.h"

#include <string>

namespace ember::rpc_status {
namespace {

constexpr StatusCode kAllCodes[] = {
    StatusCode::kInvalidArgument,   StatusCode::kNotFound,          StatusCode::kAlreadyExists,
    StatusCode::kFailedPrecondition, StatusCode::kResourceExhausted, StatusCode::kDeadlineExceeded,
    StatusCode::kUnavailable,       StatusCode::kDataLoss,          StatusCode::kCancelled,
    StatusCode::kInternal,          StatusCode::kPermissionDenied,
};

}  // namespace

kj::Exception ToException(const Status& status) {
  auto type = status.code() == StatusCode::kResourceExhausted ? kj::Exception::Type::OVERLOADED
                                                              : kj::Exception::Type::FAILED;
  std::string text = status.ToString();
  return kj::Exception(type, __FILE__, __LINE__, kj::heapString(text.data(), text.size()));
}

namespace {

// The status `text` names with its prefix, if it names one.
bool ParseDescription(const std::string& text, Status* status) {
  for (StatusCode code : kAllCodes) {
    std::string prefix = std::string(StatusCodeName(code)) + ": ";
    if (text.rfind(prefix, 0) == 0) {
      *status = Status(code, text.substr(prefix.size()));
      return true;
    }
  }
  return false;
}

}  // namespace

Status FromDescription(const std::string& text) {
  Status status = Status::Ok();
  if (ParseDescription(text, &status)) return status;
  return Internal(text);
}

Status FromException(const kj::Exception& exception, const Link& link) {
  std::string text(exception.getDescription().cStr());
  const std::string remote = "remote exception: ";
  // Once per hop: a daemon that forwards another daemon's answer adds a prefix too.
  int hops = 0;
  for (; text.rfind(remote, 0) == 0; ++hops) text = text.substr(remote.size());
  Status status = Status::Ok();
  if (ParseDescription(text, &status)) return status;
  if (exception.getType() == kj::Exception::Type::DISCONNECTED) {
    if (hops == 0) return Unavailable("connection to " + link.next + " lost: " + text);
    return Unavailable(link.next + " lost its connection to " +
                       (link.beyond.empty() ? std::string("another daemon") : link.beyond) +
                       ": " + text);
  }
  return Internal(text);
}

}  // namespace ember::rpc_status
