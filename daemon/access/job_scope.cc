#include "daemon/access/job_scope.h"

namespace ember::daemon {
namespace {

// "" for a privileged caller: its names are the keys.
std::string Scope(const Principal& caller) {
  if (caller.privileged) return "";
  if (caller.team) return "~team/";
  return "~" + std::to_string(caller.uid) + "/";
}

}  // namespace

std::string JobKey(const Principal& caller, const std::string& job) { return Scope(caller) + job; }

std::string CallerJobName(const Principal& caller, const std::string& key) {
  const std::string scope = Scope(caller);
  if (!scope.empty() && key.compare(0, scope.size(), scope) == 0) return key.substr(scope.size());
  return key;
}

std::string CallerJobNames(const Principal& caller, std::string message) {
  const std::string quoted = "'" + Scope(caller);
  if (quoted.size() == 1) return message;
  for (size_t at = message.find(quoted); at != std::string::npos;
       at = message.find(quoted, at + 1)) {
    message.erase(at + 1, quoted.size() - 1);
  }
  return message;
}

Status CallerJobNames(const Principal& caller, const Status& status) {
  if (status.ok()) return status;
  return Status(status.code(), CallerJobNames(caller, status.message()));
}

}  // namespace ember::daemon
