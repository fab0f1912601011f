// UnfinishedMessages: bounds what clients can make emberd hold in messages not yet wholly
// received or sent. Both ways a client could make the daemon hold memory it never frees:
// - Incoming: Cap'n Proto allocates a whole message once its header (the segment table)
//   has arrived, so a client announcing 60 MiB and sending 59 held 60 MiB until it
//   disconnected. BoundedStream follows the framing of the bytes it reads: a message's
//   body counts against its uid's share and the daemon's total from its header until its
//   last byte, and must arrive within a deadline.
// - Outgoing: replies a client does not read queue behind each other in the RPC system
//   (800 kvGet of a 1 MiB value, never read, held 800 MB). A reply being written counts
//   against the uid's share and the total until the client has taken its last byte, and
//   must be taken within the deadline; while a reply is unsent, the connection reads no
//   further call (calls are read only at message boundaries, so a call never waits
//   half-read), so a client that stops reading stops being served instead of piling up.
// Past a share, a total or a deadline the connection is closed, with a log line naming
// the uid.
//
// Thread-safety: not thread-safe; the client listener's event loop is its only user.
#ifndef EMBER_DAEMON_SERVER_UNFINISHED_MESSAGES_H_
#define EMBER_DAEMON_SERVER_UNFINISHED_MESSAGES_H_

#include <kj/async-io.h>
#include <kj/timer.h>
#include <sys/types.h>

#include <cstdint>
#include <map>

#include "ember/status.h"

namespace ember::daemon {

struct UnfinishedLimits {
  uint64_t per_uid_bytes = uint64_t{256} << 20;  // one uid's messages in progress
  uint64_t total_bytes = uint64_t{1} << 30;      // everyone's
  kj::Duration deadline = 30 * kj::SECONDS;      // from a message's start to its end
  const char* noun = "unfinished messages";      // what errors call them
};

// The limits of replies not yet taken by their clients.
inline UnfinishedLimits UnsentReplyLimits() {
  UnfinishedLimits limits;
  limits.per_uid_bytes = uint64_t{128} << 20;
  limits.noun = "unsent replies";
  return limits;
}

class UnfinishedMessages {
 public:
  explicit UnfinishedMessages(UnfinishedLimits limits = {}) : limits_(limits) {}

  // Counts `bytes` of a message begun by `uid`. kResourceExhausted naming the uid, the
  // limit and the bytes when it would go past the uid's share or the total (nothing is
  // counted then). `exempt` (root, emberd's own uid) counts in the total only.
  Status Begin(uid_t uid, bool exempt, uint64_t bytes);
  // The message of `bytes` ended (or its connection did).
  void End(uid_t uid, uint64_t bytes);

  uint64_t total() const { return total_; }
  uint64_t of(uid_t uid) const;
  const UnfinishedLimits& limits() const { return limits_; }

 private:
  const UnfinishedLimits limits_;
  uint64_t total_ = 0;
  std::map<uid_t, uint64_t> by_uid_;  // uids with a message in progress
};

// `inner` read through `incoming` and written through `outgoing`: see the file comment.
// The budgets and `timer` must outlive the stream.
kj::Own<kj::AsyncCapabilityStream> NewBoundedStream(kj::Own<kj::AsyncCapabilityStream> inner,
                                                    UnfinishedMessages& incoming,
                                                    UnfinishedMessages& outgoing, uid_t uid,
                                                    bool exempt, kj::Timer& timer);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_SERVER_UNFINISHED_MESSAGES_H_
