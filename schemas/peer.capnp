# Daemon to daemon: the RPC interface emberd serves on its TCP endpoint (config key
# `listen`) to other nodes' daemons, over mutual TLS (daemon/peer). Trainers and emberctl
# never use it; they talk to their local daemon (ember.capnp).
#
# Errors travel as Cap'n Proto exceptions whose description starts with
# "<status code name>: " (see ember/status.h) followed by the message.

@0x884d993e931f0a7f;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("ember::rpc");

# The bootstrap capability of every daemon-to-daemon connection.
interface Peer {
  # The first call on a connection: each side names its node (config key `node`) and the
  # protocol version it speaks (1). A version other than the server's fails with
  # failed_precondition naming both versions.
  hello @0 (node :Text, protocol :UInt32) -> (node :Text, protocol :UInt32);
}
