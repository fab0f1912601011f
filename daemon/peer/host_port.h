// HOST:PORT, the address of a daemon's TCP endpoint for other daemons (config key
// `listen`, emberd's --listen, a coordinator's address).
#ifndef EMBER_DAEMON_PEER_HOST_PORT_H_
#define EMBER_DAEMON_PEER_HOST_PORT_H_

#include <cstdint>
#include <string>

#include "ember/status.h"

namespace ember::daemon {

struct HostPort {
  std::string host;   // an IPv4 or IPv6 literal (without brackets) or a name
  uint16_t port = 0;  // 0: any free port (when listening)

  // "10.0.0.5:7000", "[::1]:7000", "node0:7000": the form ParseHostPort and kj's
  // network take.
  std::string ToString() const;
  // Whether host is an IPv4 or IPv6 literal rather than a name.
  bool HostIsAddress() const;
};

// Parses "HOST:PORT": HOST an IPv4 literal, a bracketed IPv6 literal ("[::1]:7000") or a
// name (letters, digits, '-', '.', '_'); PORT digits in 0..65535. kInvalidArgument
// otherwise, quoting the text: "expected HOST:PORT (e.g. 10.0.0.5:7000, [::1]:7000 or
// node0:7000), got '...'".
Result<HostPort> ParseHostPort(const std::string& text);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_HOST_PORT_H_
