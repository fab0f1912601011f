// CallerEnv: an Env that reads files only as far as a given user could.
//
// The daemon may run with more rights than its clients (as root, or as a service user
// others share files with). A dataset registered by a client is probed and read through
// a CallerEnv holding that client's credentials, so the client cannot make the daemon
// read what it could not read itself.
//
// Checks: a path is resolved (symlinks included), every directory on the resolved path
// must be searchable (x) by the credentials, a file read (ReadFile, OpenForRead,
// MapReadOnly) must be readable (r) and a directory listed (ListDir) readable and
// searchable. The file is opened along the resolved path with symlinks refused
// (openat2 RESOLVE_NO_SYMLINKS), and its permission is checked on the opened
// descriptor, so swapping a symlink in after the check does not help. The check reads
// the mode bits (owner, group, other; the supplementary groups count): POSIX ACL entries
// are not consulted. kPermissionDenied names the path and the directory or file refused
// ("/data/x/a.png: permission denied for uid 1001 (search /data/x)").
//
// Everything else (writes, memfds, the clock) forwards to the base Env unchecked: the
// daemon writes only its own state. Thread-safety: as the base Env (immutable itself).
#ifndef EMBER_COMMON_CALLER_ENV_H_
#define EMBER_COMMON_CALLER_ENV_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/env.h"
#include "ember/status.h"

namespace ember {

// Whose rights a file access uses: the effective uid, gid and supplementary groups of a
// process (as SO_PEERCRED and SO_PEERGROUPS report them for a socket's peer).
struct Credentials {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::vector<gid_t> groups;

  bool InGroup(gid_t g) const;
};

// Whether `creds` may open a file of `st`'s owner and mode for `want` (a mask of R_OK,
// W_OK, X_OK), by the mode bits alone. uid 0 may do anything but execute a file nobody may.
bool ModeAllows(const Credentials& creds, const struct stat& st, int want);

// `base` must outlive the CallerEnv.
std::unique_ptr<Env> NewCallerEnv(Env* base, Credentials creds);

// The Env that reads as `creds` (a CallerEnv over `base`), or `base` itself (not owned)
// where there are none: files are then read with the daemon's own rights.
std::shared_ptr<Env> EnvReadingAs(Env* base, const std::optional<Credentials>& creds);

}  // namespace ember

#endif  // EMBER_COMMON_CALLER_ENV_H_
