#include "daemon/access/principal.h"

namespace ember::daemon {

bool MayAccess(const Principal& caller, const Principal& owner) {
  if (caller.privileged || !owner.known()) return true;
  if (!caller.known()) return false;
  return caller.uid == owner.uid || (caller.team && owner.team);
}

std::string Describe(const Principal& owner) {
  if (!owner.known()) return "an unknown owner";
  return "uid " + std::to_string(owner.uid) + (owner.team ? ", share group" : "");
}

AccessPolicy::AccessPolicy(uid_t daemon_uid, std::optional<gid_t> share_group)
    : daemon_uid_(daemon_uid), share_group_(share_group) {}

Principal AccessPolicy::Identify(const Credentials& creds) const {
  Principal p;
  if (creds.uid == kUnknownUid) return p;
  p.uid = creds.uid;
  p.privileged = creds.uid == 0 || creds.uid == daemon_uid_;
  p.team = share_group_.has_value() && creds.InGroup(*share_group_);
  return p;
}

Principal AccessPolicy::Peer() {
  Principal p;
  p.uid = 0;
  p.privileged = true;
  return p;
}

}  // namespace ember::daemon
