// ClientListener: the unix socket local trainers and emberctl connect to. Each accepted
// connection gets a Session (its peer's uid and groups from SO_PEERCRED/SO_PEERGROUPS,
// admitted against the uid's connection limit) and a DaemonServer bootstrapped over
// Cap'n Proto RPC, able to pass file descriptors (the rings' memfds).
//
// Lifetime: Start binds the socket and accepts until StopAccepting() or destruction;
// destroying the listener drops every connection (their streams close) and removes the
// socket file. Event loop's thread only.
#ifndef EMBER_DAEMON_SERVER_CLIENT_LISTENER_H_
#define EMBER_DAEMON_SERVER_CLIENT_LISTENER_H_

#include <kj/async-io.h>

#include <memory>
#include <string>

#include "common/env.h"
#include "daemon/rpc/daemon_server.h"
#include "daemon/server/unfinished_messages.h"
#include "daemon/service/daemon_service.h"
#include "ember/status.h"

namespace ember::daemon {

// A socket file left by a daemon that died is removed; one that still answers means
// another emberd is serving there: kFailedPrecondition. Creates the socket's directory.
// Errors name the path.
Status PrepareSocketPath(Env& env, const std::string& path);

class ClientListener final : private kj::TaskSet::ErrorHandler {
 public:
  // Listens on the unix socket `path` (see PrepareSocketPath) and serves `service` on each
  // connection; `open_remote` (may be null) serves jobs another daemon coordinates.
  // Everything must outlive the listener. Errors: "cannot listen on <path>: <reason>".
  static Result<std::unique_ptr<ClientListener>> Start(kj::AsyncIoContext& io,
                                                       const std::string& path,
                                                       DaemonService& service,
                                                       const RemoteJobOpener* open_remote);
  // Drops every connection, then removes the socket file.
  ~ClientListener();

  // Resolves if accepting fails for good (after logging why); EMFILE and the like are
  // retried after a second. Call once.
  kj::Promise<void> OnFailure();

  // Closes the socket for new connections; those open go on. Idempotent.
  void StopAccepting();

  // Client connections open now.
  size_t open_connections() const { return open_; }

 private:
  struct Connection;
  ClientListener(kj::AsyncIoContext& io, std::string path, DaemonService& service,
                 const RemoteJobOpener* open_remote, kj::Own<kj::ConnectionReceiver> socket);
  kj::Promise<void> AcceptLoop();
  void taskFailed(kj::Exception&& e) override;

  kj::Timer& timer_;
  UnfinishedMessages unfinished_;  // what clients' half-sent messages hold, by uid
  UnfinishedMessages unsent_{UnsentReplyLimits()};  // replies clients have not yet read
  const std::string path_;
  DaemonService& service_;
  const RemoteJobOpener* const open_remote_;
  kj::Own<kj::ConnectionReceiver> socket_;  // null once StopAccepting
  kj::Own<kj::TaskSet> connections_;
  size_t open_ = 0;  // connections in connections_
  kj::Own<kj::PromiseFulfiller<void>> failed_;
  kj::Maybe<kj::Promise<void>> on_failure_;  // until OnFailure takes it
  kj::Promise<void> accepting_ = nullptr;      // the accept loop; dropped before socket_
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_SERVER_CLIENT_LISTENER_H_
