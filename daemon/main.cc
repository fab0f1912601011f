// emberd: wiring only. Reads the config (a file, flags over it), opens the catalog, starts
// the pools and serves Cap'n Proto RPC on the unix socket until SIGTERM / SIGINT, which
// drain first (daemon/lifecycle/drain.h); SIGHUP reloads the live keys of the config
// (daemon/config/config_reload.h).
#include <signal.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/thread_pool.hpp>
#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "daemon/catalog/catalog.h"
#include "daemon/config/config.h"
#include "daemon/config/config_reload.h"
#include "daemon/coordinator/job_ledger.h"
#include "daemon/coordinator/kv_store.h"
#include "daemon/coordinator/ledger_journal.h"
#include "daemon/coordinator/shared_segments.h"
#include "common/env.h"
#include "daemon/data/dataset_cache.h"
#include "daemon/data/formats.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "daemon/lifecycle/drain.h"
#include "daemon/lifecycle/watchdog.h"
#include "daemon/metrics/metrics_server.h"
#include "daemon/metrics/prometheus_text.h"
#include "daemon/peer/host_port.h"
#include "daemon/peer/loop_links.h"
#include "daemon/peer/peer_listener.h"
#include "daemon/peer/peer_tls.h"
#include "daemon/rpc/daemon_server.h"
#include "daemon/rpc/peer_server.h"
#include "daemon/rpc/remote_coordinator.h"
#include "daemon/service/daemon_service.h"
#include "daemon/service/session.h"
#include "daemon/stream/stream_manager.h"

namespace ember::daemon {
namespace {

constexpr const char* kVersion = "0.1.0";
constexpr unsigned kMaxFdsPerMessage = 4;

// The most supplementary groups of a peer read (SO_PEERGROUPS); a peer in more is
// treated as in its primary group only.
constexpr size_t kMaxPeerGroups = 1024;

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

// One client connection: its session, its RPC system and the DaemonServer it bootstraps.
struct Connection {
  Connection(DaemonService& service, kj::Timer& timer, const RemoteJobOpener* open_remote,
             kj::Own<kj::AsyncCapabilityStream> s, std::shared_ptr<Session> session)
      : stream(kj::mv(s)),
        network(*stream, kMaxFdsPerMessage, capnp::rpc::twoparty::Side::SERVER),
        rpc(capnp::makeRpcServer(
            network, kj::heap<DaemonServer>(service, std::move(session), timer, open_remote))) {}
  kj::Own<kj::AsyncCapabilityStream> stream;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
};

class LogErrors final : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&& e) override {
    spdlog::warn("connection ended: {}", e.getDescription().cStr());
  }
};

// After accept() itself fails (out of descriptors: EMFILE, ENFILE), the wait before
// accepting again; the connections already open go on meanwhile.
constexpr kj::Duration kAcceptRetryDelay = 1 * kj::SECONDS;

kj::Promise<void> AcceptLoop(kj::ConnectionReceiver& listener, DaemonService& service,
                             kj::Timer& timer, const RemoteJobOpener* open_remote,
                             kj::TaskSet& connections) {
  // evalNow: accept() may throw at once (EMFILE), not only fail its promise.
  return kj::evalNow([&] { return listener.accept(); })
      .then(
          [&, open_remote](kj::Own<kj::AsyncIoStream>&& io) -> kj::Promise<void> {
            auto stream = io.downcast<kj::AsyncCapabilityStream>();
            std::shared_ptr<Session> session = NewSession(service, PeerOf(*stream));
            if (!session) return kj::READY_NOW;  // dropping the stream closes it
            auto connection = kj::heap<Connection>(service, timer, open_remote, kj::mv(stream),
                                                   std::move(session));
            auto disconnected = connection->network.onDisconnect();
            connections.add(disconnected.attach(kj::mv(connection)));
            return kj::READY_NOW;
          },
          [&timer](kj::Exception&& e) -> kj::Promise<void> {
            spdlog::error("accepting connections failed, retrying in 1 s: {}",
                          e.getDescription().cStr());
            return timer.afterDelay(kAcceptRetryDelay);
          })
      .then([&, open_remote] {
        return AcceptLoop(listener, service, timer, open_remote, connections);
      });
}

// A socket file left by a daemon that died is removed; one that still answers means
// another emberd is serving there, which is an error.
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
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  if (live) return FailedPrecondition("another emberd is already serving on " + path);
  spdlog::info("removing stale socket {}", path);
  if (unlink(path.c_str()) != 0) return ErrnoStatus("removing stale socket " + path, errno);
  return Status::Ok();
}

// The command line: a config file (none: DaemonConfig's defaults, which are those that
// configs/emberd.yaml documents) and the settings given as flags, which override it.
struct CommandLine {
  std::string config_path;
  std::optional<std::string> socket_path;
  std::optional<std::string> state_dir;
  std::optional<uint32_t> decode_threads;
  std::optional<uint64_t> shm_budget_bytes;
  std::optional<uint32_t> default_slots;
  std::optional<std::string> log_level;
  std::optional<std::string> listen;
};

// The file's settings (if any) with the flags' over them; the file's errors name it and
// the key. Flag values were checked while parsing.
Result<DaemonConfig> ResolveConfig(Env& env, const CommandLine& cli) {
  DaemonConfig config;
  if (!cli.config_path.empty()) {
    EMBER_ASSIGN_OR_RETURN(config, LoadConfig(env, cli.config_path));
  }
  if (cli.socket_path) config.socket_path = *cli.socket_path;
  if (cli.state_dir) config.state_dir = *cli.state_dir;
  if (cli.decode_threads) config.decode_threads = *cli.decode_threads;
  if (cli.shm_budget_bytes) config.shm_budget_bytes = *cli.shm_budget_bytes;
  if (cli.default_slots) config.default_slots = *cli.default_slots;
  if (cli.log_level) config.log_level = *cli.log_level;
  if (cli.listen) {
    config.listen = *cli.listen;
    Status tls = CheckListenHasTls(config);
    if (!tls.ok()) return InvalidArgument("--listen: " + tls.message());
  }
  return config;
}

// This daemon's name for other nodes: key `node`, else the host's name.
std::string NodeName(const DaemonConfig& config) {
  if (!config.node_name.empty()) return config.node_name;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return host;
}

// The TCP endpoint for other daemons (key `listen`) serving PeerServer on each
// connection. Logs where it listens and writes the bound port, in decimal, to
// <state_dir>/peer.port (for port 0: how tests and scripts learn it).
// Connections are served on config.peer_threads peer loops; their openJob reaches the
// stores, which live on `io`'s loop, through `links`.
Result<std::unique_ptr<PeerListener>> ListenForPeers(Env& env, kj::AsyncIoContext& io,
                                                     const DaemonConfig& config, PeerTls* tls,
                                                     JobLedger* jobs, DaemonService* service,
                                                     LoopLinks* links) {
  const std::string node = NodeName(config);
  PeerListenerOptions options;
  options.serve_threads = config.peer_threads != 0
                              ? config.peer_threads
                              : std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  // On the peer loop serving the connection; the stores' PeerServer (at_home) on the main loop.
  auto factory = [&io, links, node, jobs, service](const PeerInfo& peer,
                                                   kj::AsyncIoContext& loop) {
    auto at_home = [&io, node, peer, service] {
      return capnp::Capability::Client(
          kj::heap<PeerServer>(node, peer, nullptr, service, &io.provider->getTimer()));
    };
    return capnp::Capability::Client(kj::heap<PeerServer>(
        node, peer, jobs, [links, &loop, at_home] { return links->Connect(loop, at_home); }));
  };
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PeerListener> listener,
                         PeerListener::Start(io, config.listen, tls, factory, options));
  EMBER_ASSIGN_OR_RETURN(HostPort bound, ParseHostPort(config.listen));
  bound.port = listener->port();
  EMBER_RETURN_IF_ERROR(env.WriteFileAtomic(config.state_dir + "/peer.port",
                                            std::to_string(bound.port) + "\n"));
  if (tls == nullptr) {
    spdlog::warn("tls: off: peer connections on {} are plain TCP, neither authenticated nor "
                 "encrypted; set tls: {{cert, key, ca}} for mutual TLS",
                 bound.ToString());
  }
  spdlog::info("listening for peers on {} (tls: {}) as node '{}', {} peer threads",
               bound.ToString(), tls == nullptr ? "off" : "on", node, options.serve_threads);
  return listener;
}

// SIGHUP: reads the config file again (flags still over it) and applies what may change
// live to `running` and the daemon; logs what changed and each refused key. A config that
// does not load is logged and changes nothing.
void Reload(Env& env, const CommandLine& cli, DaemonConfig* running, StreamManager& streams) {
  if (cli.config_path.empty()) {
    spdlog::info("reload: no config file (--config) to read again; nothing changed");
    return;
  }
  Result<DaemonConfig> loaded = ResolveConfig(env, cli);
  if (!loaded.ok()) {
    spdlog::error("reload: {}; kept the running config", loaded.status().message());
    return;
  }
  ConfigReload reload = DiffConfigs(*running, *loaded, cli.config_path);
  for (const std::string& refused : reload.refused) spdlog::warn("reload: {}", refused);
  *running = reload.config;
  spdlog::set_level(spdlog::level::from_str(running->log_level));
  streams.SetBudget(running->shm_budget_bytes, running->default_slots);
  spdlog::info("{}", DescribeChanges(reload));
}

// The HTTP endpoint for Prometheus (key `metrics_listen`) rendering the service's status on
// each scrape. Logs where it listens and writes the bound port to <state_dir>/metrics.port.
Result<std::unique_ptr<MetricsServer>> ServeMetrics(Env& env, kj::AsyncIoContext& io,
                                                    const DaemonConfig& config,
                                                    DaemonService& service) {
  EMBER_ASSIGN_OR_RETURN(
      std::unique_ptr<MetricsServer> server,
      MetricsServer::Start(io, config.metrics_listen,
                           // The operator's view: every job and dataset (keep the address private).
                           [&service] { return RenderPrometheusText(service.GetStatus(AccessPolicy::Peer())); }));
  EMBER_RETURN_IF_ERROR(env.WriteFileAtomic(config.state_dir + "/metrics.port",
                                            std::to_string(server->port()) + "\n"));
  spdlog::info("serving metrics on {} (port {}) at /metrics", config.metrics_listen,
               server->port());
  return server;
}

int Serve(const CommandLine& cli) {
  const std::string config_path = cli.config_path.empty() ? "emberd" : cli.config_path;
  // Before any thread starts: the signals must stay blocked in every thread but the
  // event loop's.
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  kj::UnixEventPort::captureSignal(SIGHUP);
  std::unique_ptr<Env> env = NewPosixEnv();
  auto config = ResolveConfig(*env, cli);
  if (!config.ok()) {
    spdlog::error("{}", config.status().message());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(config->log_level));
  auto plugins = PluginRegistry::Load(config->plugin_paths);
  if (!plugins.ok()) {
    spdlog::error("{}: {}", config_path, plugins.status().message());
    return 2;
  }
  const PluginRegistry* registry = plugins->get();
  for (const std::string& format : registry->Formats()) {
    spdlog::info("format '{}' from plugin {}", format, registry->Find(format)->path());
  }
  for (const std::string& step : registry->Transforms()) {
    spdlog::info("pipeline step '{}' from plugin {}", step, registry->FindTransform(step)->path());
  }
  Status plugins_ok = CheckPluginFormats(*registry);
  if (!plugins_ok.ok()) {
    spdlog::error("{}: {}", config_path, plugins_ok.message());
    return 2;
  }
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned decode_threads = config->decode_threads ? config->decode_threads : cores;

  auto catalog = Catalog::Open(
      env.get(), config->state_dir,
      [&env, registry](const DatasetSpec& spec, const DatasetOwner& owner) {
        return ProbeDatasetAs(env.get(), spec, owner.reads_as, registry);
      });
  if (!catalog.ok()) {
    spdlog::error("{}", catalog.status().message());
    return 2;
  }
  Status socket_ok = PrepareSocketPath(*env, config->socket_path);
  if (!socket_ok.ok()) {
    spdlog::error("{}", socket_ok.message());
    return 2;
  }
  std::unique_ptr<PeerTls> peer_tls;
  if (config->tls == PeerTlsMode::kOn) {
    auto loaded = PeerTls::Load(*env, config->tls_files.cert_path, config->tls_files.key_path,
                                config->tls_files.ca_path);
    if (!loaded.ok()) {
      spdlog::error("{}: tls: {}", config_path, loaded.status().message());
      return 2;
    }
    peer_tls = std::move(loaded).value();
  }

  // Jobs' progress survives a restart; a damaged journal stops the daemon rather than
  // forgetting what ranks consumed.
  JobLedger ledger;
  // Proxies to the daemons that coordinate jobs of ranks here (by HOST:PORT); outlive the
  // streams, shut down on the event loop before it goes.
  std::map<std::string, std::unique_ptr<RemoteCoordinator>> remotes;
  const std::string journal_path = config->state_dir + "/jobs.journal";
  auto ledger_journal = LedgerJournal::Open(*env, journal_path, &ledger);
  if (!ledger_journal.ok()) {
    spdlog::error("{}", ledger_journal.status().message());
    return 2;
  }
  spdlog::info("{}: replayed {} jobs ({} commits, {} records){}", journal_path,
               ledger_journal->jobs, ledger_journal->commits, ledger_journal->records,
               ledger_journal->torn_bytes == 0
                   ? ""
                   : ", cut a torn tail of " + std::to_string(ledger_journal->torn_bytes) +
                         " bytes");
  KvStore kv;
  SharedSegments segments(env.get());
  DatasetCache cache(env.get(), decode_threads, registry);
  DecodePool decode_pool(decode_threads);
  boost::asio::thread_pool blocking(2);
  StreamLimits limits;
  limits.shm_budget_bytes = config->shm_budget_bytes;
  limits.default_slots = config->default_slots;
  limits.shm_user_share = config->user_limits.shm_share;
  limits.max_streams_per_user = config->user_limits.streams;
  StreamManager streams(env.get(), catalog->get(), &ledger, &cache, &decode_pool, limits);

  auto io = kj::setupAsyncIo();
  std::optional<gid_t> share_gid;
  if (!config->share_group.empty()) {
    const struct group* group = getgrnam(config->share_group.c_str());  // once, at start
    if (group == nullptr) {
      spdlog::error("{}: share_group: no group named '{}' on this host", config_path,
                    config->share_group);
      return 2;
    }
    share_gid = group->gr_gid;
  }
  const AccessPolicy access(geteuid(), share_gid);
  ServiceDeps deps;
  deps.access = &access;
  deps.user_limits = config->user_limits;
  deps.env = env.get();
  deps.catalog = catalog->get();
  deps.streams = &streams;
  deps.ledger = &ledger;
  deps.kv = &kv;
  deps.segments = &segments;
  deps.blocking = &blocking;
  deps.version = kVersion;
  deps.pid = static_cast<uint32_t>(getpid());
  deps.proxied_jobs = [&remotes] {
    std::vector<JobSummary> jobs;
    for (const auto& [address, remote] : remotes) {
      std::vector<JobSummary> some = remote->Summaries();
      jobs.insert(jobs.end(), some.begin(), some.end());
    }
    return jobs;
  };
  DaemonService service(std::move(deps));

  int exit_code = 0;
  {
    LogErrors log_errors;
    kj::TaskSet connections(log_errors);
    // Before the unix socket: once it answers, <state_dir>/peer.port is there.
    LoopLinks links(io);  // outlives the listener: its connections' links to this loop
    std::unique_ptr<PeerListener> peers;
    if (!config->listen.empty()) {
      auto listening =
          ListenForPeers(*env, io, *config, peer_tls.get(), &ledger, &service, &links);
      if (!listening.ok()) {
        spdlog::error("{}", listening.status().message());
        return 2;
      }
      peers = std::move(listening).value();
    }
    std::unique_ptr<MetricsServer> metrics;
    if (!config->metrics_listen.empty()) {
      auto serving = ServeMetrics(*env, io, *config, service);
      if (!serving.ok()) {
        spdlog::error("{}", serving.status().message());
        return 2;
      }
      metrics = std::move(serving).value();
    }
    const std::string node = NodeName(*config);
    const uint16_t peer_port = peers ? peers->port() : 0;
    // The proxy to the daemon at HOST:PORT `address`; null when that is this daemon.
    auto remote_at = [&, node, peer_port](const std::string& address)
        -> Result<RemoteCoordinator*> {
      EMBER_ASSIGN_OR_RETURN(HostPort where, ParseHostPort(address));
      if (peers && where.port == peer_port &&
          (where.host == "127.0.0.1" || where.host == "localhost" || where.host == "::1" ||
           where.host == node || address == config->listen ||
           where.host == ParseHostPort(config->listen).value().host))
        return nullptr;
      if (config->listen.empty())
        return FailedPrecondition("this daemon has no `listen` endpoint, so no TLS identity "
                                  "to reach other daemons with");
      auto& remote = remotes[address];
      if (!remote) {
        RemoteCoordinatorOptions options;
        options.node = node;
        options.reconnect_timeout = std::chrono::seconds(config->reconnect_timeout_s);
        remote = std::make_unique<RemoteCoordinator>(io, peer_tls.get(), address, options);
      }
      return remote.get();
    };
    streams.set_coordinator_resolver(
        [&remote_at, &ledger](const std::string& address) -> Result<JobCoordinator*> {
          EMBER_ASSIGN_OR_RETURN(RemoteCoordinator* remote, remote_at(address));
          if (remote == nullptr) return &ledger;
          return remote;
        });
    const RemoteJobOpener open_remote_job =
        [&remote_at](const std::string& job, const std::string& address,
                     const Principal& caller) -> Result<std::optional<rpc::Job::Client>> {
      Result<RemoteCoordinator*> remote = remote_at(address);
      if (!remote.ok()) return remote.status().WithContext("coordinator '" + address + "'");
      if (*remote == nullptr) return std::optional<rpc::Job::Client>();
      return std::optional<rpc::Job::Client>((*remote)->OpenJob(job, caller));
    };
    kj::Own<kj::ConnectionReceiver> listener;
    KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] {
      auto address =
          io.provider->getNetwork().parseAddress(kj::str("unix:", config->socket_path.c_str()))
              .wait(io.waitScope);
      listener = address->listen();
    })) {
      spdlog::error("cannot listen on {}: {}", config->socket_path, e->getDescription().cStr());
      return 2;
    }
    spdlog::info("emberd {} serving on {} (state {}, {} decode threads, shm budget {} bytes, "
                 "{} datasets)",
                 kVersion, config->socket_path, config->state_dir, decode_threads,
                 config->shm_budget_bytes, (*catalog)->List().size());
    sd_notify(0, ("READY=1\nSTATUS=serving on " + config->socket_path).c_str());
    kj::Timer& timer = io.provider->getTimer();
    const kj::Duration watchdog_interval = WatchdogPingInterval();
    kj::Promise<void> watchdog = kj::NEVER_DONE;
    if (watchdog_interval > 0 * kj::SECONDS) {
      spdlog::info("watchdog: pinging systemd every {} ms", watchdog_interval / kj::MILLISECONDS);
      watchdog = PingWatchdog(timer, watchdog_interval).eagerlyEvaluate(nullptr);
    }
    std::function<kj::Promise<void>()> reload_on_hangup = [&]() -> kj::Promise<void> {
      return io.unixEventPort.onSignal(SIGHUP).then([&](siginfo_t) {
        sd_notify(0, "RELOADING=1");
        Reload(*env, cli, &*config, streams);
        sd_notify(0, "READY=1");
        return reload_on_hangup();
      });
    };
    auto reloading = reload_on_hangup().eagerlyEvaluate([](kj::Exception&& e) {
      spdlog::error("reloading on SIGHUP stopped: {}", e.getDescription().cStr());
    });

    auto accepting = AcceptLoop(*listener, service, io.provider->getTimer(), &open_remote_job, connections)
                         .eagerlyEvaluate([&](kj::Exception&& e) {
                           spdlog::error("accept failed: {}", e.getDescription().cStr());
                           exit_code = 1;
                         });
    // Jobs that never fill expire (JobLedger::ExpireUnfilled), checked every second.
    std::function<kj::Promise<void>()> expire_jobs = [&]() -> kj::Promise<void> {
      return io.provider->getTimer().afterDelay(1 * kj::SECONDS).then([&] {
        const uint64_t fill_timeout_micros = uint64_t{config->job_fill_timeout_s} * 1000000;
        for (const std::string& expired :
             ledger.ExpireUnfilled(env->NowMicros(), fill_timeout_micros))
          spdlog::warn("{}", expired);
        return expire_jobs();
      });
    };
    auto expiring = expire_jobs().eagerlyEvaluate([](kj::Exception&& e) {
      spdlog::error("job expiry stopped: {}", e.getDescription().cStr());
    });
    auto sigterm = io.unixEventPort.onSignal(SIGTERM).then([](siginfo_t) { return SIGTERM; });
    auto sigint = io.unixEventPort.onSignal(SIGINT).then([](siginfo_t) { return SIGINT; });
    int sig = sigterm.exclusiveJoin(kj::mv(sigint)).wait(io.waitScope);
    spdlog::info("signal {} received, shutting down: no new connections or streams, "
                 "draining for up to {} s",
                 sig, config->drain_timeout_s);
    sd_notify(0, "STOPPING=1");
    accepting = kj::READY_NOW;
    listener = nullptr;
    const size_t undrained =
        DrainStreams(timer, streams, config->drain_timeout_s * kj::SECONDS).wait(io.waitScope);
    if (undrained == 0) {
      spdlog::info("drained: no batch in flight");
    } else {
      spdlog::warn("drain_timeout ({} s) passed with {} batches still being written; closing "
                   "their streams",
                   config->drain_timeout_s, undrained);
    }
    for (auto& [address, remote] : remotes) remote->Shutdown();
    // Peer connections close on their loops while this one runs (their links end here).
    if (peers) peers->Stop().wait(io.waitScope);
  }  // drops the listener and every connection: their streams close and free their rings
  // Let file work in flight (a dataset being probed) finish while the event loop it
  // would report to still exists; its caller is gone, so the result is dropped.
  blocking.join();
  // The streams closed above committed what their trainers consumed: make it durable.
  Status synced = ledger_journal->journal->journal().Sync();
  if (!synced.ok()) spdlog::error("flushing the job journal: {}", synced.message());
  unlink(config->socket_path.c_str());
  if (!config->listen.empty()) unlink((config->state_dir + "/peer.port").c_str());
  if (!config->metrics_listen.empty()) unlink((config->state_dir + "/metrics.port").c_str());
  spdlog::info("emberd stopped");
  return exit_code;
}

}  // namespace
}  // namespace ember::daemon

int main(int argc, char** argv) {
  CLI::App app{"emberd: serves training data to PyTorch distributed training"};
  ember::daemon::CommandLine cli;
  app.add_option("-c,--config", cli.config_path,
                 "YAML config file (see configs/emberd.yaml); without one, the defaults "
                 "documented there");
  // Each flag overrides its config key.
  std::string socket_path, state_dir, shm_budget, log_level, listen;
  uint32_t decode_threads = 0, ring_slots = 0;
  CLI::Option* socket_flag =
      app.add_option("--socket", socket_path, "unix socket to serve on (key: socket)");
  CLI::Option* state_dir_flag =
      app.add_option("--state-dir", state_dir, "directory of the catalog (key: state_dir)");
  CLI::Option* decode_threads_flag =
      app.add_option("--decode-threads", decode_threads,
                     "decode threads, 0 = one per core (key: decode_threads)")
          ->check(CLI::Range(0u, 1024u));
  CLI::Option* shm_budget_flag =
      app.add_option("--shm-budget", shm_budget,
                     "shared memory for all rings, e.g. 512MiB (key: shm_budget)")
          ->check([](const std::string& text) {
            auto bytes = ember::daemon::ParseByteSize(text);
            if (!bytes.ok()) return bytes.status().message();
            return *bytes == 0 ? std::string("must be positive") : std::string();
          });
  CLI::Option* ring_slots_flag =
      app.add_option("--ring-slots", ring_slots, "slots per ring by default (key: ring_slots)")
          ->check(CLI::Range(2u, 1024u));
  CLI::Option* log_level_flag =
      app.add_option("--log-level", log_level, "least severe messages logged (key: log_level)")
          ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  CLI::Option* listen_flag =
      app.add_option("--listen", listen,
                     "HOST:PORT of the TCP endpoint for other nodes' daemons, port 0 for any "
                     "free one; needs key tls in the config file (key: listen)")
          ->check([](const std::string& text) {
            auto address = ember::daemon::ParseHostPort(text);
            return address.ok() ? std::string() : address.status().message();
          });
  app.set_version_flag("--version", "emberd 0.1.0");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (*socket_flag) cli.socket_path = socket_path;
  if (*state_dir_flag) cli.state_dir = state_dir;
  if (*decode_threads_flag) cli.decode_threads = decode_threads;
  if (*shm_budget_flag) cli.shm_budget_bytes = *ember::daemon::ParseByteSize(shm_budget);
  if (*ring_slots_flag) cli.default_slots = ring_slots;
  if (*log_level_flag) cli.log_level = log_level;
  if (*listen_flag) cli.listen = listen;
  spdlog::set_default_logger(spdlog::stderr_color_mt("emberd"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  signal(SIGPIPE, SIG_IGN);
  return ember::daemon::Serve(cli);
}
