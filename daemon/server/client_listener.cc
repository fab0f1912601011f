#include "daemon/server/client_listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <capnp/rpc-twoparty.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/unix_socket.h"
#include "daemon/service/session.h"

namespace ember::daemon {
namespace {

constexpr unsigned kMaxFdsPerMessage = 4;

// The most supplementary groups of a peer read (SO_PEERGROUPS); a peer in more is
// treated as in its primary group only.
constexpr size_t kMaxPeerGroups = 1024;

// After accept() itself fails (out of descriptors: EMFILE, ENFILE), the wait before
// accepting again; the connections already open go on meanwhile.
constexpr kj::Duration kAcceptRetryDelay = 1 * kj::SECONDS;

// The peer of an accepted unix-socket connection (SO_PEERCRED, SO_PEERGROUPS: as the
// kernel recorded them at connect()), or unknown (-1) if the kernel does not say.
PeerCredentials PeerOf(kj::AsyncIoStream& stream) {
  PeerCredentials peer;
  struct ucred cred {};
  uint length = sizeof(cred);
  KJ_IF_MAYBE(e, kj::runCatchingExceptions(
                     [&] { stream.getsockopt(SOL_SOCKET, SO_PEERCRED, &cred, &length); })) {
    spdlog::warn("connection without peer credentials: {}", e->getDescription().cStr());
    return peer;
  }
  peer.pid = cred.pid;
  peer.creds.uid = cred.uid;
  peer.creds.gid = cred.gid;
  std::vector<gid_t> groups(kMaxPeerGroups);
  uint groups_length = static_cast<uint>(groups.size() * sizeof(gid_t));
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] {
                stream.getsockopt(SOL_SOCKET, SO_PEERGROUPS, groups.data(), &groups_length);
              })) {
    spdlog::warn("connection from pid {} (uid {}): supplementary groups unknown: {}", peer.pid,
                 cred.uid, e->getDescription().cStr());
    groups_length = 0;
  }
  groups.resize(groups_length / sizeof(gid_t));
  peer.creds.groups = std::move(groups);
  spdlog::debug("connection from pid {} (uid {}, gid {}, {} groups)", peer.pid, cred.uid,
                cred.gid, peer.creds.groups.size());
  return peer;
}

// The session of a new connection; null if its uid has all the connections it may.
std::shared_ptr<Session> NewSession(DaemonService& service, PeerCredentials peer) {
  const Principal principal = service.Identify(peer.creds);
  auto session = std::make_shared<Session>(service, std::move(peer), principal);
  Status admitted = session->Admit();
  if (!admitted.ok()) {
    spdlog::warn("connection from pid {} refused: {}", session->peer().pid, admitted.message());
    return nullptr;
  }
  return session;
}

}  // namespace

// One client connection: its session, its RPC system and the DaemonServer it bootstraps.
struct ClientListener::Connection {
  Connection(kj::Timer& timer, const RemoteJobOpener* open_remote,
             kj::Own<kj::AsyncCapabilityStream> s, std::shared_ptr<Session> session)
      : stream(kj::mv(s)),
        network(*stream, kMaxFdsPerMessage, capnp::rpc::twoparty::Side::SERVER),
        rpc(capnp::makeRpcServer(
            network, kj::heap<DaemonServer>(std::move(session), timer, open_remote))) {}
  kj::Own<kj::AsyncCapabilityStream> stream;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
};

Status PrepareSocketPath(Env& env, const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un::sun_path))
    return InvalidArgument("socket: path '" + path + "' is longer than " +
                           std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0)
    EMBER_RETURN_IF_ERROR(env.CreateDirs(path.substr(0, slash)));
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();
  if (!S_ISSOCK(st.st_mode))
    return FailedPrecondition("socket: '" + path + "' exists and is not a socket");
  if (UnixSocketAnswers(path))
    return FailedPrecondition("another emberd is already serving on " + path);
  spdlog::info("removing stale socket {}", path);
  if (unlink(path.c_str()) != 0) return ErrnoStatus("removing stale socket " + path, errno);
  return Status::Ok();
}

Result<std::unique_ptr<ClientListener>> ClientListener::Start(kj::AsyncIoContext& io,
                                                              const std::string& path,
                                                              DaemonService& service,
                                                              const RemoteJobOpener* open_remote) {
  kj::Own<kj::ConnectionReceiver> socket;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] {
    auto address = io.provider->getNetwork()
                       .parseAddress(kj::str("unix:", path.c_str()))
                       .wait(io.waitScope);
    socket = address->listen();
  })) {
    return Unavailable("cannot listen on " + path + ": " + e->getDescription().cStr());
  }
  return std::unique_ptr<ClientListener>(
      new ClientListener(io, path, service, open_remote, kj::mv(socket)));
}

ClientListener::ClientListener(kj::AsyncIoContext& io, std::string path, DaemonService& service,
                               const RemoteJobOpener* open_remote,
                               kj::Own<kj::ConnectionReceiver> socket)
    : timer_(io.provider->getTimer()),
      path_(std::move(path)),
      service_(service),
      open_remote_(open_remote),
      socket_(kj::mv(socket)),
      connections_(kj::heap<kj::TaskSet>(static_cast<kj::TaskSet::ErrorHandler&>(*this))) {
  auto failure = kj::newPromiseAndFulfiller<void>();
  failed_ = kj::mv(failure.fulfiller);
  on_failure_ = kj::mv(failure.promise);
  accepting_ = AcceptLoop().eagerlyEvaluate([this](kj::Exception&& e) {
    spdlog::error("accept failed: {}", e.getDescription().cStr());
    failed_->fulfill();
  });
}

ClientListener::~ClientListener() {
  StopAccepting();
  connections_ = nullptr;  // every connection's session, streams and rings
  unlink(path_.c_str());
}

kj::Promise<void> ClientListener::OnFailure() {
  KJ_IF_MAYBE(promise, on_failure_) {
    kj::Promise<void> taken = kj::mv(*promise);
    on_failure_ = nullptr;
    return taken;
  }
  return kj::NEVER_DONE;
}

void ClientListener::StopAccepting() {
  accepting_ = kj::READY_NOW;  // before the socket its accept() waits on
  socket_ = nullptr;
}

kj::Promise<void> ClientListener::AcceptLoop() {
  // evalNow: accept() may throw at once (EMFILE), not only fail its promise.
  return kj::evalNow([this] { return socket_->accept(); })
      .then(
          [this](kj::Own<kj::AsyncIoStream>&& io) -> kj::Promise<void> {
            auto stream = io.downcast<kj::AsyncCapabilityStream>();
            std::shared_ptr<Session> session = NewSession(service_, PeerOf(*stream));
            if (!session) return kj::READY_NOW;  // dropping the stream closes it
            const Principal& who = session->principal();
            auto bounded = NewBoundedStream(kj::mv(stream), unfinished_, unsent_, who.uid,
                                            who.privileged, timer_);
            auto connection = kj::heap<Connection>(timer_, open_remote_, kj::mv(bounded),
                                                   std::move(session));
            auto disconnected = connection->network.onDisconnect();
            ++open_;
            connections_->add(
                disconnected.attach(kj::mv(connection), kj::defer([this] { --open_; })));
            return kj::READY_NOW;
          },
          [this](kj::Exception&& e) -> kj::Promise<void> {
            spdlog::error("accepting connections failed, retrying in 1 s: {}",
                          e.getDescription().cStr());
            return timer_.afterDelay(kAcceptRetryDelay);
          })
      .then([this] { return AcceptLoop(); });
}

void ClientListener::taskFailed(kj::Exception&& e) {
  spdlog::warn("connection ended: {}", e.getDescription().cStr());
}

}  // namespace ember::daemon
