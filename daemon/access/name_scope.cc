#include "daemon/access/name_scope.h"

namespace ember::daemon {
namespace {

// "" for a privileged caller: its names are the keys.
std::string Scope(const Principal& caller) {
  if (caller.privileged) return "";
  if (caller.team) return "~team/";
  return "~" + std::to_string(caller.uid) + "/";
}

}  // namespace

std::string ScopedKey(const Principal& caller, const std::string& name) {
  return Scope(caller) + name;
}

std::string DatasetKey(const Principal& caller, const std::string& name, bool shared) {
  return shared ? name : ScopedKey(caller, name);
}

std::string UnscopedName(const std::string& key) {
  if (key.empty() || key[0] != '~') return key;
  const size_t slash = key.find('/');
  return slash == std::string::npos ? key : key.substr(slash + 1);
}

std::string CallerName(const Principal& caller, const std::string& key) {
  const std::string scope = Scope(caller);
  if (!scope.empty() && key.compare(0, scope.size(), scope) == 0) return key.substr(scope.size());
  return key;
}

std::string CallerNames(const Principal& caller, std::string message) {
  const std::string quoted = "'" + Scope(caller);
  if (quoted.size() == 1) return message;
  for (size_t at = message.find(quoted); at != std::string::npos;
       at = message.find(quoted, at + 1)) {
    message.erase(at + 1, quoted.size() - 1);
  }
  return message;
}

Status CallerNames(const Principal& caller, const Status& status) {
  if (status.ok()) return status;
  return Status(status.code(), CallerNames(caller, status.message()));
}

}  // namespace ember::daemon
