// A daemon on demand: where Client::Connect finds no emberd (no EMBER_SOCKET, no system
// daemon answering on kDefaultSocket), it starts a private one for the calling user, as
// `ray.init()` starts what it needs.
//
// The private daemon of a user on a node: socket $XDG_RUNTIME_DIR/ember/emberd.sock (where
// $XDG_RUNTIME_DIR exists; else /tmp/ember-<uid>/emberd.sock), state under $XDG_CACHE_HOME/ember (else
// ~/.cache/ember), its log beside the socket. Every process of the user finds the same
// one: finding and starting happen under an flock of ember.lock in the socket's
// directory, so that ranks started at once start one daemon between them. It is started
// detached (its own session, not a child of the trainer) as
//   $EMBER_EMBERD (else `emberd` on PATH) --socket S --state-dir D --idle-exit N
// and stops by itself N seconds after its last client left (EMBER_IDLE_EXIT, default
// 300). EMBER_AUTOSTART=0 turns all of this off.
#ifndef EMBER_SDK_SRC_PRIVATE_DAEMON_H_
#define EMBER_SDK_SRC_PRIVATE_DAEMON_H_

#include <chrono>
#include <string>

#include "ember/status.h"

namespace ember {

// The socket of the calling user's private daemon, started first if none answers; waits
// up to `timeout` for a started one to answer. kUnavailable naming what failed: the
// directory, the program, or the daemon's log's last line.
Result<std::string> EnsurePrivateDaemon(std::chrono::milliseconds timeout);

// Whether EMBER_AUTOSTART allows a private daemon (unset or anything but "0").
bool AutostartAllowed();

// The socket of the calling user's private daemon if one answers there; starts and makes
// nothing. kNotFound naming the socket (or why its directory is not the user's) otherwise.
Result<std::string> RunningPrivateDaemon();

}  // namespace ember

#endif  // EMBER_SDK_SRC_PRIVATE_DAEMON_H_
