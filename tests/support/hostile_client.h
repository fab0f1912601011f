// Clients that misbehave on purpose, below the SDK: for the isolation tests and the
// adversary soak (bench/adversary). Each speaks to an emberd's unix socket as the calling
// process's uid.
#ifndef EMBER_TESTS_SUPPORT_HOSTILE_CLIENT_H_
#define EMBER_TESTS_SUPPORT_HOSTILE_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ember::testing {

// A raw connection to the unix socket `path` (no RPC), or -1.
int ConnectRaw(const std::string& path);

// Over one connection that never reads a reply: sets a value of `value_bytes` in job
// `job`, then asks for it `gets` times, everything pipelined; after `settle` (for the
// daemon to take what it will), runs `while_held` with the connection still open. ""
// once done, else what went wrong. (The finding: 800 gets of 1 MiB, never read, grew
// emberd by 800 MB.)
std::string SendCallsNeverReadReplies(const std::string& socket, const std::string& job,
                                      uint32_t value_bytes, int gets,
                                      std::chrono::milliseconds settle,
                                      const std::function<void()>& while_held);

// `count` raw connections, each announcing a one-segment message of `announced` bytes and
// sending `sent` bytes of it (a send that fails means the daemon closed it). The
// descriptors, open (the caller closes them); -1 where a connect failed.
std::vector<int> SendHalfMessages(const std::string& socket, int count, uint32_t announced,
                                  uint32_t sent);

// How many of `fds` the daemon has closed (end of stream or an error on a read that
// does not wait).
int CountClosed(const std::vector<int>& fds);

}  // namespace ember::testing

#endif  // EMBER_TESTS_SUPPORT_HOSTILE_CLIENT_H_
