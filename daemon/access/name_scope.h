// Whose a name is: each user names jobs and datasets in a namespace of its own.
//
// Jobs. A trainer's job name ("train", or the SDK's default python-<pid>.<dataset>) means the
// job of that name *of the caller*: a non-privileged uid's names are kept under its uid
// ("~1001/train"), the share group's under the group ("~team/train", so a team runs one
// job from several accounts), a privileged caller's as given. So no uid can hold, squat on
// or learn of another uid's job by its name: to anyone else it does not exist, and a call
// on it makes that caller's own job of the name. Everything below the session (the
// ledger, its journal, the stores, segments and the peers) sees only the scoped key; the
// session turns it back into the caller's name for what it shows.
//
// Datasets likewise, with one common namespace beside the users' own: a dataset a user
// registers unshared is keyed in its scope, so that its name tells no one else anything
// and another user may register the same name (and gets its own). A shared dataset (and
// any dataset of a privileged caller) is keyed by its bare name, the one everyone uses to
// stream it. A name means the caller's own dataset if it has one, else the common one of
// that name if the caller may read it (DaemonService::FindDataset).
#ifndef EMBER_DAEMON_ACCESS_NAME_SCOPE_H_
#define EMBER_DAEMON_ACCESS_NAME_SCOPE_H_

#include <cstddef>
#include <string>

#include "daemon/access/principal.h"
#include "ember/status.h"

namespace ember::daemon {

// The most a scope adds to a name ("~4294967295/").
inline constexpr size_t kMaxScopeBytes = 12;

// The key of `caller`'s job (or unshared dataset) named `name`.
std::string ScopedKey(const Principal& caller, const std::string& name);

// The key a dataset named `name` that `caller` registers gets: its bare name if
// `shared` or the caller is privileged, else ScopedKey.
std::string DatasetKey(const Principal& caller, const std::string& name, bool shared);

// `key` without its scope ("~1001/x" -> "x"; a bare name as it is).
std::string UnscopedName(const std::string& key);

// How `caller` sees the job keyed `key`: its own name without the scope; a key of
// another scope (only a privileged caller sees those) as it is.
std::string CallerName(const Principal& caller, const std::string& key);

// `message` with `caller`'s job keys (quoted, as JobName writes them) put back as the
// caller's names: what an error from below says to the session's caller.
std::string CallerNames(const Principal& caller, std::string message);
// `status` with its message so (OK stays OK).
Status CallerNames(const Principal& caller, const Status& status);
template <typename T>
Result<T> CallerNames(const Principal& caller, Result<T> result) {
  if (result.ok()) return result;
  return CallerNames(caller, result.status());
}

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_ACCESS_NAME_SCOPE_H_
