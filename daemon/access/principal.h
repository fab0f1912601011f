// Who asks and who owns: the identity the daemon's access rules work with.
//
// A client connection's principal comes from the kernel (SO_PEERCRED, SO_PEERGROUPS at
// connect time), never from what the client says. Datasets, jobs (their streams, keys,
// barriers and shared-memory segments) belong to the principal that created them.
//
// Rules (MayAccess): a principal reaches what it owns; a privileged one (root, or the
// uid emberd runs as) reaches everything; members of the configured share group (config
// `share_group`) reach each other's jobs and datasets, so a team can run one job from
// several accounts. A thing whose owner is not known (registered before owners were
// recorded) is open to all.
#ifndef EMBER_DAEMON_ACCESS_PRINCIPAL_H_
#define EMBER_DAEMON_ACCESS_PRINCIPAL_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "common/caller_env.h"

namespace ember::daemon {

inline constexpr uid_t kUnknownUid = static_cast<uid_t>(-1);

struct Principal {
  uid_t uid = kUnknownUid;
  bool team = false;        // a member of the share group
  bool privileged = false;  // root or the daemon's own uid

  bool known() const { return uid != kUnknownUid; }
};

// Whether `caller` may see, use or remove what `owner` owns.
bool MayAccess(const Principal& caller, const Principal& owner);

// "uid 1001" (", share group" for a team member); "an unknown owner".
std::string Describe(const Principal& owner);

// The process at the other end of a unix-socket connection.
struct PeerCredentials {
  pid_t pid = -1;
  Credentials creds;  // uid, gid and supplementary groups; uid -1 where unknown
};

// Turns credentials into principals under the daemon's configuration.
class AccessPolicy {
 public:
  // `daemon_uid`: the uid emberd runs as; `share_group`: the share group's gid, if any.
  AccessPolicy(uid_t daemon_uid, std::optional<gid_t> share_group);

  // An unknown uid gets an unprivileged principal that owns nothing.
  Principal Identify(const Credentials& creds) const;

  // The principal of another node's daemon acting for its ranks: privileged (peers are
  // authenticated by mutual TLS; they check their own clients).
  static Principal Peer();

 private:
  const uid_t daemon_uid_;
  const std::optional<gid_t> share_group_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_ACCESS_PRINCIPAL_H_
