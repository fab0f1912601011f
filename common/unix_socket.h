// Whether something serves on a unix socket: what the daemon checks before it takes a
// socket's path (another emberd there?) and what the SDK checks before it starts a
// private daemon (is one serving already?).
#ifndef EMBER_COMMON_UNIX_SOCKET_H_
#define EMBER_COMMON_UNIX_SOCKET_H_

#include <string>

namespace ember {

// True if a connect() to the unix socket at `path` succeeds now (the connection is closed
// at once). False for a path too long for a socket address, a stale socket file or none.
bool UnixSocketAnswers(const std::string& path);

}  // namespace ember

#endif  // EMBER_COMMON_UNIX_SOCKET_H_
