// Whose a job's name is: each user names jobs in a namespace of its own.
//
// A trainer's job name ("train", or the SDK's default python-<pid>.<dataset>) means the
// job of that name *of the caller*: a non-privileged uid's names are kept under its uid
// ("~1001/train"), the share group's under the group ("~team/train", so a team runs one
// job from several accounts), a privileged caller's as given. So no uid can hold, squat on
// or learn of another uid's job by its name: to anyone else it does not exist, and a call
// on it makes that caller's own job of the name. Everything below the session (the
// ledger, its journal, the stores, segments and the peers) sees only the scoped key; the
// session turns it back into the caller's name for what it shows.
#ifndef EMBER_DAEMON_ACCESS_JOB_SCOPE_H_
#define EMBER_DAEMON_ACCESS_JOB_SCOPE_H_

#include <cstddef>
#include <string>

#include "daemon/access/principal.h"
#include "ember/status.h"

namespace ember::daemon {

// The most a scope adds to a name ("~4294967295/").
inline constexpr size_t kMaxJobScopeBytes = 12;

// The key of `caller`'s job named `job`.
std::string JobKey(const Principal& caller, const std::string& job);

// How `caller` sees the job keyed `key`: its own name without the scope; a key of
// another scope (only a privileged caller sees those) as it is.
std::string CallerJobName(const Principal& caller, const std::string& key);

// `message` with `caller`'s job keys (quoted, as JobName writes them) put back as the
// caller's names: what an error from below says to the session's caller.
std::string CallerJobNames(const Principal& caller, std::string message);
// `status` with its message so (OK stays OK).
Status CallerJobNames(const Principal& caller, const Status& status);
template <typename T>
Result<T> CallerJobNames(const Principal& caller, Result<T> result) {
  if (result.ok()) return result;
  return CallerJobNames(caller, result.status());
}

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_ACCESS_JOB_SCOPE_H_
