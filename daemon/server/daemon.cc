#include "daemon/server/daemon.h"

#include <grp.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <boost/asio/thread_pool.hpp>
#include <kj/async-io.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "daemon/catalog/catalog.h"
#include "daemon/config/config_reload.h"
#include "daemon/coordinator/job_ledger.h"
#include "daemon/coordinator/kv_store.h"
#include "daemon/coordinator/ledger_journal.h"
#include "daemon/coordinator/shared_segments.h"
#include "daemon/data/dataset_cache.h"
#include "daemon/data/formats.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "daemon/data/remote/s3_config.h"
#include "daemon/data/remote/shard_cache.h"
#include "daemon/decode/decode_lender.h"
#include "daemon/decode/remote_decoders.h"
#include "daemon/lifecycle/drain.h"
#include "daemon/lifecycle/watchdog.h"
#include "daemon/metrics/metrics_server.h"
#include "daemon/metrics/prometheus_text.h"
#include "daemon/peer/host_port.h"
#include "daemon/peer/peer_wire.h"
#include "daemon/peer/loop_links.h"
#include "daemon/peer/peer_listener.h"
#include "daemon/peer/peer_tls.h"
#include "daemon/rpc/decode_rows.h"
#include "daemon/rpc/peer_server.h"
#include "daemon/coordinator/remote_coordinator.h"
#include "daemon/rpc/peer_channel.h"
#include "daemon/server/client_listener.h"
#include "daemon/service/daemon_service.h"
#include "daemon/service/peer_service.h"
#include "daemon/stream/stream_manager.h"

namespace ember::daemon {
namespace {

constexpr const char* kVersion = "0.1.0";

// This daemon's name for other nodes: key `node`, else the host's name.
// Creates the state directory if need be and makes it and what it holds emberd's alone
// (0700, files 0600) whatever the umask: the catalog and the journal name every user's
// paths, uids and jobs. Also fixes a directory an older emberd left readable.
Status PrivateStateDir(Env& env, const std::string& dir) {
  EMBER_RETURN_IF_ERROR(env.CreateDirs(dir));
  EMBER_RETURN_IF_ERROR(env.RestrictToOwner(dir));
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> names, env.ListDir(dir));
  for (const std::string& name : names) {
    const Status restricted = env.RestrictToOwner(dir + "/" + name);
    if (!restricted.ok() && restricted.code() != StatusCode::kFailedPrecondition &&
        restricted.code() != StatusCode::kNotFound)
      return restricted;
  }
  return Status::Ok();
}

std::string NodeName(const DaemonConfig& config) {
  if (!config.node_name.empty()) return config.node_name;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return host;
}

// Runs `step` every `interval` on the calling thread's event loop, until the promise is
// dropped.
kj::Promise<void> Every(kj::Timer& timer, kj::Duration interval, std::function<void()> step) {
  return timer.afterDelay(interval).then([&timer, interval, step = std::move(step)]() mutable {
    step();
    return Every(timer, interval, std::move(step));
  });
}

// s3:// datasets are read with emberd's own S3 credentials (its environment and AWS
// files), also at a dataset's own endpoint (requests signed with them go to that host):
// only a principal who could use those anyway may register one, root or emberd's own uid
// (a private per-user emberd reads with its user's credentials).
Status MayUseS3Credentials(const DatasetSpec& spec, const Principal& owner) {
  if ((!UsesS3Credentials(spec.path) && spec.endpoint.empty()) || owner.privileged)
    return Status::Ok();
  return PermissionDenied(
      spec.path + ": an S3 dataset is read with emberd's own S3 credentials, so only root "
      "and emberd's user (uid " + std::to_string(geteuid()) + ") may register one on this "
      "shared emberd, not " + Describe(owner) + "; a private emberd of your own reads S3 "
      "with your credentials");
}

// emberd's S3 configuration (s3_config.h), read once; what is wrong with it is kept for
// the s3:// datasets it refuses, and logged.
std::shared_ptr<const S3Config> LoadS3ConfigOnce(Env& env) {
  auto config = std::make_shared<S3Config>();
  Result<S3Config> loaded = LoadS3Config(env);
  if (!loaded.ok()) {
    config->unusable = loaded.status().WithContext("S3 configuration");
    spdlog::warn("s3:// datasets will be refused: {}", config->unusable.message());
  } else {
    *config = std::move(loaded).value();
    if (config->unusable.ok()) {
      spdlog::info("S3: endpoint {} (from {}), region {} (from {}), credentials from {}",
                   config->endpoint, config->endpoint_from, config->region, config->region_from,
                   config->credentials_from);
    } else {
      spdlog::info("s3:// datasets will be refused: {}", config->unusable.message());
    }
  }
  return config;
}

}  // namespace

// The subsystems, declared in the order they are built; each uses only those above it.
// Built, served and destroyed on the daemon's thread.
class Daemon::Parts {
 public:
  Parts(Env* env, DaemonConfig config, std::string source)
      : env_(env), config_(std::move(config)), source_(std::move(source)) {}
  ~Parts();

  // The start-up steps (daemon.h), up to the socket accepting.
  Status Open();
  // Serves until `stop` (its reason) or accepting fails; then shuts down.
  Status Serve(kj::Promise<std::string> stop);
  void Reload(const DaemonConfig& loaded);

  kj::AsyncIoContext& io() { return *io_; }
  uint16_t peer_port() const { return peers_ ? peers_->port() : 0; }
  uint16_t metrics_port() const { return metrics_ ? metrics_->port() : 0; }

 private:
  Status OpenState();
  Status StartService();
  Status ListenForPeers();
  Status ServeMetrics();
  // The proxy to the daemon at HOST:PORT `address`; null when that is this daemon.
  // A coordinating daemon elsewhere: the channel to it, and the proxy over that channel.
  struct Remote {
    std::unique_ptr<PeerChannel> channel;  // declared first: outlives the proxy
    std::unique_ptr<RemoteCoordinator> coordinator;
  };
  // Null when `address` is this daemon.
  Result<Remote*> RemoteAt(const std::string& address);
  // Whether `where` is this daemon's own peer endpoint.
  bool IsThisDaemon(const HostPort& where) const;
  void Shutdown(const std::string& why);

  Env* const env_;
  DaemonConfig config_;  // the live keys change on Reload
  const std::string source_;
  const std::string node_ = NodeName(config_);
  unsigned decode_threads_ = 1;
  bool stopping_ = false;

  // The event loop first: everything below may use it.
  std::unique_ptr<kj::AsyncIoContext> io_;
  std::unique_ptr<PluginRegistry> plugins_;
  // Shards read from http(s):// and s3:// URLs (cache_dir, cache_limit; S3 as
  // LoadS3ConfigOnce found it), before the catalog whose probes fill it.
  std::unique_ptr<ShardCache> shards_;
  // What each uid's datasets hold in memory (user_limits.dataset_memory): registration
  // checks a set would fit, the cache charges it while loaded.
  DatasetMemory dataset_memory_{config_.user_limits.dataset_memory};
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<PeerTls> peer_tls_;
  // Jobs' progress survives a restart; a damaged journal stops the daemon rather than
  // forgetting what ranks consumed.
  JobLedger ledger_{config_.max_world_size};
  // Proxies to the daemons that coordinate jobs of ranks here (by HOST:PORT); outlive the
  // streams, shut down on the event loop before it goes.
  std::map<std::string, Remote> remotes_;
  LedgerReplay journal_;
  KvStore kv_;
  std::unique_ptr<SharedSegments> segments_;
  std::unique_ptr<DatasetCache> cache_;
  std::unique_ptr<DecodePool> decode_pool_;
  std::unique_ptr<boost::asio::thread_pool> blocking_;
  // Other daemons decoding parts of this one's batches (config decode_workers), over
  // decode rows streams; outlives the streams that use it.
  std::vector<std::unique_ptr<DecodeRowsChannel>> decode_channels_;
  std::unique_ptr<RemoteDecoders> remote_decoders_;
  std::unique_ptr<StreamManager> streams_;
  // Other nodes' decoding on decode_pool_ (config lend_decode); null: not lent.
  std::unique_ptr<DecodeLender> lender_;
  std::unique_ptr<AccessPolicy> access_;
  std::unique_ptr<DaemonService> service_;
  RemoteJobOpener open_remote_job_;
  // The peer side: the jobs (any peer loop) and the stores (this loop only).
  std::unique_ptr<PeerService> peer_jobs_;
  std::unique_ptr<PeerService> peer_stores_;
  std::unique_ptr<DecodeRowsServer> decode_rows_;  // other nodes' decode rows streams
  // What serves on the loop; closed first.
  std::unique_ptr<LoopLinks> links_;  // outlives the peer listener: its connections' links
  std::unique_ptr<PeerListener> peers_;
  std::unique_ptr<MetricsServer> metrics_;
  std::unique_ptr<ClientListener> clients_;
};

Daemon::Parts::~Parts() {
  // The loop goes before the streams: a producer still waiting on a remote coordinator's
  // loop then fails at once instead of waiting for a loop that no longer turns.
  clients_.reset();
  metrics_.reset();
  peers_.reset();
  links_.reset();
  if (io_ == nullptr) return;
  // The peer loops are gone, so nothing queues work here any more: run what they queued
  // last (a lease's answer, a link's end), or the loop's destructor throws that events
  // are left, which ~Parts (noexcept) turns into an abort.
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([this] {
    io_->waitScope.poll();
    io_.reset();
  })) {
    spdlog::warn("closing the event loop: {}", e->getDescription().cStr());
  }
}

Status Daemon::Parts::Open() {
  io_ = std::make_unique<kj::AsyncIoContext>(kj::setupAsyncIo());
  EMBER_RETURN_IF_ERROR(OpenState());
  EMBER_RETURN_IF_ERROR(StartService());
  // Before the unix socket: once it answers, <state_dir>/peer.port is there.
  if (!config_.listen.empty()) EMBER_RETURN_IF_ERROR(ListenForPeers());
  if (!config_.metrics_listen.empty()) EMBER_RETURN_IF_ERROR(ServeMetrics());
  EMBER_ASSIGN_OR_RETURN(clients_, ClientListener::Start(*io_, config_.socket_path, *service_,
                                                         &open_remote_job_));
  spdlog::info("emberd {} serving on {} (state {}, {} decode threads, shm budget {} bytes, "
               "{} datasets)",
               kVersion, config_.socket_path, config_.state_dir, decode_threads_,
               config_.shm_budget_bytes, catalog_->List().size());
  sd_notify(0, ("READY=1\nSTATUS=serving on " + config_.socket_path).c_str());
  return Status::Ok();
}

// Plugins, catalog, socket path, TLS keys and the journal: what is on disk, checked
// before anything serves.
Status Daemon::Parts::OpenState() {
  auto plugins = PluginRegistry::Load(config_.plugin_paths);
  if (!plugins.ok()) return plugins.status().WithContext(source_);
  plugins_ = std::move(plugins).value();
  for (const std::string& format : plugins_->Formats())
    spdlog::info("format '{}' from plugin {}", format, plugins_->Find(format)->path());
  for (const std::string& step : plugins_->Transforms())
    spdlog::info("pipeline step '{}' from plugin {}", step,
                 plugins_->FindTransform(step)->path());
  EMBER_RETURN_IF_ERROR(CheckPluginFormats(*plugins_).WithContext(source_));
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  decode_threads_ = config_.decode_threads ? config_.decode_threads : cores;

  EMBER_RETURN_IF_ERROR(
      PrivateStateDir(*env_, config_.state_dir).WithContext(source_ + ": state_dir"));
  const std::string cache_dir =
      config_.cache_dir.empty() ? config_.state_dir + "/shard-cache" : config_.cache_dir;
  FetchOptions fetch;
  fetch.s3 = LoadS3ConfigOnce(*env_);
  auto shards = ShardCache::Open(*env_, cache_dir, config_.cache_limit_bytes, HttpFetcher(fetch));
  if (!shards.ok()) return shards.status().WithContext(source_ + ": cache_dir");
  shards_ = std::move(shards).value();
  shards_->SetPrefetchSteps(config_.cache_prefetch_steps);
  shards_->SetEviction(config_.cache_eviction == "lru" ? ShardCache::Eviction::kLru
                                                       : ShardCache::Eviction::kBelady);
  const FormatDeps deps(plugins_.get(), shards_.get());
  EMBER_ASSIGN_OR_RETURN(
      catalog_, Catalog::Open(env_, config_.state_dir,
                              [env = env_, deps, memory = &dataset_memory_](
                                  const DatasetSpec& spec, const DatasetOwner& owner,
                                  IndexingProgress* progress) -> Result<DatasetInfo> {
                                EMBER_RETURN_IF_ERROR(MayUseS3Credentials(spec, owner.principal));
                                auto charge = memory->For(owner.principal);
                                FormatDeps probing = deps;
                                probing.progress = progress;
                                Result<DatasetInfo> info = ProbeDatasetAs(
                                    env, spec, owner.reads_as, probing, charge.get());
                                if (info.ok()) info->index_bytes = charge->bytes();
                                return info;
                              }));
  EMBER_RETURN_IF_ERROR(PrepareSocketPath(*env_, config_.socket_path));
  if (config_.tls == PeerTlsMode::kOn) {
    auto loaded = PeerTls::Load(*env_, config_.tls_files.cert_path, config_.tls_files.key_path,
                                config_.tls_files.ca_path);
    if (!loaded.ok()) return loaded.status().WithContext(source_ + ": tls");
    peer_tls_ = std::move(loaded).value();
  }
  const std::string journal_path = config_.state_dir + "/jobs.journal";
  Result<LedgerReplay> replayed = LedgerJournal::Open(*env_, journal_path, &ledger_);
  if (replayed.status().code() == StatusCode::kDataLoss)
    return Status(StatusCode::kDataLoss,
                  replayed.status().message() + ". emberd does not start on a damaged journal "
                  "(it holds the jobs' progress): keep it for a bug report (mv " + journal_path +
                  " " + journal_path + ".damaged) and start again; its jobs start afresh, and "
                  "trainers resume from the loader state in their checkpoints");
  if (!replayed.ok()) return replayed.status();
  journal_ = std::move(replayed).value();
  spdlog::info("{}: replayed {} jobs ({} commits, {} records){}", journal_path, journal_.jobs,
               journal_.commits, journal_.records,
               journal_.torn_bytes == 0
                   ? ""
                   : ", cut a torn tail of " + std::to_string(journal_.torn_bytes) + " bytes");
  return Status::Ok();
}

// The stores, the decode pool, the streams and the service over them.
Status Daemon::Parts::StartService() {
  SharedSegmentLimits segment_limits;
  segment_limits.max_world_size = config_.max_world_size;
  segments_ = std::make_unique<SharedSegments>(env_, segment_limits);
  cache_ = std::make_unique<DatasetCache>(env_, decode_threads_,
                                          FormatDeps(plugins_.get(), shards_.get()),
                                          &dataset_memory_);
  decode_pool_ = std::make_unique<DecodePool>(decode_threads_);
  blocking_ = std::make_unique<boost::asio::thread_pool>(2);
  StreamLimits limits;
  limits.shm_budget_bytes = config_.shm_budget_bytes;
  limits.default_slots = config_.default_slots;
  limits.shm_user_share = config_.user_limits.shm_share;
  limits.max_streams_per_user = config_.user_limits.streams;
  limits.max_world_size = config_.max_world_size;
  limits.share_window = config_.share_window;
  streams_ = std::make_unique<StreamManager>(env_, catalog_.get(), &ledger_, cache_.get(),
                                             decode_pool_.get(), limits);
  if (config_.lend_decode) {
    lender_ = std::make_unique<DecodeLender>(
        catalog_.get(), [cache = cache_.get()](const DatasetInfo& info) { return cache->Get(info); },
        decode_pool_.get());
    if (config_.listen.empty())
      spdlog::warn("{}: lend_decode: true, but no listen: no other node can reach this daemon",
                   source_);
  }
  if (!config_.decode_workers.empty()) {
    if (peer_tls_ == nullptr)
      return InvalidArgument("decode_workers: needs tls (decode rows streams are mutual TLS "
                             "only), and this daemon has tls: off");
    std::vector<RemoteDecoders::Worker> workers;
    for (const std::string& address : config_.decode_workers) {
      Result<HostPort> where = ParseHostPort(address);
      if (!where.ok()) return where.status().WithContext("decode_workers: '" + address + "'");
      if (IsThisDaemon(*where))
        return InvalidArgument("decode_workers: '" + address + "' is this daemon");
      decode_channels_.push_back(std::make_unique<DecodeRowsChannel>(*peer_tls_, address));
      workers.push_back({address, decode_channels_.back().get()});
    }
    remote_decoders_ = std::make_unique<RemoteDecoders>(std::move(workers),
                                                         RemoteDecodersOptions{});
    streams_->set_remote_decoders(remote_decoders_.get());
    spdlog::info("decoding parts of its streams' batches with {} worker(s) too (decode_workers)",
                 config_.decode_workers.size());
  }
  streams_->set_coordinator_resolver(
      [this](const std::string& address) -> Result<JobCoordinator*> {
        EMBER_ASSIGN_OR_RETURN(Remote * remote, RemoteAt(address));
        if (remote == nullptr) return &ledger_;
        return remote->coordinator.get();
      });
  open_remote_job_ = [this](const std::string& job, const std::string& address,
                            const Principal& caller) -> Result<kj::Maybe<rpc::Job::Client>> {
    Result<Remote*> remote = RemoteAt(address);
    if (!remote.ok()) return remote.status().WithContext("coordinator '" + address + "'");
    if (*remote == nullptr) return kj::Maybe<rpc::Job::Client>(nullptr);
    return kj::Maybe<rpc::Job::Client>((*remote)->channel->OpenJob(job, caller));
  };

  std::optional<gid_t> share_gid;
  if (!config_.share_group.empty()) {
    const struct group* group = getgrnam(config_.share_group.c_str());  // once, at start
    if (group == nullptr)
      return InvalidArgument(source_ + ": share_group: no group named '" +
                             config_.share_group + "' on this host");
    share_gid = group->gr_gid;
  }
  access_ = std::make_unique<AccessPolicy>(geteuid(), share_gid);
  ServiceDeps deps;
  deps.access = access_.get();
  deps.user_limits = config_.user_limits;
  deps.env = env_;
  deps.catalog = catalog_.get();
  deps.streams = streams_.get();
  deps.ledger = &ledger_;
  deps.kv = &kv_;
  deps.segments = segments_.get();
  deps.shards = shards_.get();
  deps.blocking = blocking_.get();
  deps.version = kVersion;
  deps.pid = static_cast<uint32_t>(getpid());
  deps.proxied_jobs = [this](const OwnerFilter& include) {
    std::vector<JobSummary> jobs;
    for (const auto& [address, remote] : remotes_) {
      std::vector<JobSummary> some = remote.coordinator->Summaries(include);
      jobs.insert(jobs.end(), some.begin(), some.end());
    }
    return jobs;
  };
  service_ = std::make_unique<DaemonService>(std::move(deps));
  return Status::Ok();
}

// The TCP endpoint for other daemons (key `listen`) serving PeerServer on each
// connection. Logs where it listens and writes the bound port, in decimal, to
// <state_dir>/peer.port (for port 0: how tests and scripts learn it).
// Connections are served on config.peer_threads peer loops; their openJob reaches the
// stores, which live on this loop, through `links_`.
Status Daemon::Parts::ListenForPeers() {
  links_ = std::make_unique<LoopLinks>(*io_);
  const std::set<std::string> trusted(config_.trust_root_from.begin(),
                                      config_.trust_root_from.end());
  peer_jobs_ = std::make_unique<PeerService>(
      PeerServiceDeps{node_, &ledger_, nullptr, trusted, lender_.get()});
  peer_stores_ = std::make_unique<PeerService>(
      PeerServiceDeps{node_, nullptr, service_.get(), trusted, nullptr});
  PeerListenerOptions options;
  // Other nodes' decode rows streams, on threads of their own (lend_decode; with it off,
  // each request is refused with the reason). TLS only.
  if (peer_tls_ != nullptr) {
    decode_rows_ = std::make_unique<DecodeRowsServer>(*peer_jobs_, *peer_tls_);
    options.handoffs[kPeerDecodeRowsKind] = [this](kj::AutoCloseFd socket,
                                                   const std::string& address) {
      decode_rows_->Serve(kj::mv(socket), address);
    };
  }
  options.serve_threads = config_.peer_threads != 0
                              ? config_.peer_threads
                              : std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  // On the peer loop serving the connection; the stores' PeerServer (at_home) on this loop.
  auto factory = [this](const PeerInfo& peer, kj::AsyncIoContext& loop) {
    auto at_home = [this, peer] {
      return capnp::Capability::Client(
          kj::heap<PeerServer>(*peer_stores_, peer, &io_->provider->getTimer()));
    };
    return capnp::Capability::Client(kj::heap<PeerServer>(
        *peer_jobs_, peer, [this, &loop, at_home] { return links_->Connect(loop, at_home); }));
  };
  EMBER_ASSIGN_OR_RETURN(peers_, PeerListener::Start(*io_, config_.listen, peer_tls_.get(),
                                                     factory, options));
  EMBER_ASSIGN_OR_RETURN(HostPort bound, ParseHostPort(config_.listen));
  bound.port = peers_->port();
  EMBER_RETURN_IF_ERROR(env_->WriteFileAtomic(config_.state_dir + "/peer.port",
                                              std::to_string(bound.port) + "\n"));
  EMBER_RETURN_IF_ERROR(env_->RestrictToOwner(config_.state_dir + "/peer.port"));
  if (peer_tls_ == nullptr) {
    spdlog::warn("tls: off: peer connections on {} are plain TCP, neither authenticated nor "
                 "encrypted; set tls: {{cert, key, ca}} for mutual TLS",
                 bound.ToString());
  }
  spdlog::info("listening for peers on {} (tls: {}) as node '{}', {} peer threads{}",
               bound.ToString(), peer_tls_ == nullptr ? "off" : "on", node_,
               options.serve_threads,
               lender_ != nullptr ? ", lending its decode threads (lend_decode)" : "");
  return Status::Ok();
}

// The HTTP endpoint for Prometheus (key `metrics_listen`) rendering the service's status on
// each scrape. Logs where it listens and writes the bound port to <state_dir>/metrics.port.
Status Daemon::Parts::ServeMetrics() {
  DaemonService& service = *service_;
  MetricNames names;
  names.hide = config_.metrics_hide_names;
  if (names.hide) {
    std::random_device random;
    for (uint8_t& b : names.key) b = static_cast<uint8_t>(random());
  }
  EMBER_ASSIGN_OR_RETURN(
      metrics_,
      MetricsServer::Start(*io_, config_.metrics_listen,
                           // The operator's view: every job and dataset (keep the address
                           // private, or hide the names: metrics_names).
                           [&service, names] {
                             return RenderPrometheusText(service.GetStatus(AccessPolicy::Peer()),
                                                         names);
                           }));
  EMBER_RETURN_IF_ERROR(env_->WriteFileAtomic(config_.state_dir + "/metrics.port",
                                              std::to_string(metrics_->port()) + "\n"));
  EMBER_RETURN_IF_ERROR(env_->RestrictToOwner(config_.state_dir + "/metrics.port"));
  spdlog::info("serving metrics on {} (port {}) at /metrics", config_.metrics_listen,
               metrics_->port());
  return Status::Ok();
}

Result<Daemon::Parts::Remote*> Daemon::Parts::RemoteAt(const std::string& address) {
  EMBER_ASSIGN_OR_RETURN(HostPort where, ParseHostPort(address));
  if (IsThisDaemon(where)) return nullptr;
  if (config_.listen.empty())
    return FailedPrecondition("this daemon has no `listen` endpoint, so no TLS identity "
                              "to reach other daemons with");
  Remote& remote = remotes_[address];
  if (!remote.coordinator) {
    remote.channel =
        std::make_unique<PeerChannel>(*io_->provider, peer_tls_.get(), address, node_);
    RemoteCoordinatorOptions options;
    options.node = node_;
    options.reconnect_timeout = std::chrono::seconds(config_.reconnect_timeout_s);
    remote.coordinator = std::make_unique<RemoteCoordinator>(io_->provider->getTimer(),
                                                             *remote.channel, address, options);
  }
  return &remote;
}

bool Daemon::Parts::IsThisDaemon(const HostPort& where) const {
  if (config_.listen.empty()) return false;
  const HostPort listen = ParseHostPort(config_.listen).value();
  // Before it listens, a port 0 in `listen` is no port yet.
  const uint16_t port = peers_ ? peers_->port() : listen.port;
  return port != 0 && where.port == port &&
         (where.host == "127.0.0.1" || where.host == "localhost" || where.host == "::1" ||
          where.host == node_ || where.host == listen.host);
}

Status Daemon::Parts::Serve(kj::Promise<std::string> stop) {
  kj::Timer& timer = io_->provider->getTimer();
  const kj::Duration watchdog_interval = WatchdogPingInterval();
  kj::Promise<void> watchdog = kj::NEVER_DONE;
  if (watchdog_interval > 0 * kj::SECONDS) {
    spdlog::info("watchdog: pinging systemd every {} ms", watchdog_interval / kj::MILLISECONDS);
    watchdog = PingWatchdog(timer, watchdog_interval).eagerlyEvaluate(nullptr);
  }
  // Jobs that never fill expire (JobLedger::ExpireUnfilled), checked every second.
  auto expiring = Every(timer, 1 * kj::SECONDS, [this] {
                    const uint64_t fill_timeout_micros =
                        uint64_t{config_.job_fill_timeout_s} * 1000000;
                    for (const std::string& expired :
                         ledger_.ExpireUnfilled(env_->NowMicros(), fill_timeout_micros))
                      spdlog::warn("{}", expired);
                  }).eagerlyEvaluate([](kj::Exception&& e) {
    spdlog::error("job expiry stopped: {}", e.getDescription().cStr());
  });
  Status result;
  auto failed = clients_->OnFailure().then([&result] {
    result = Unavailable("accepting connections failed");
    return std::string("accepting connections failed");
  });
  // idle_exit: stops once no client has been connected for that long (checked each second).
  auto idle = kj::newPromiseAndFulfiller<std::string>();
  uint64_t idle_since_micros = env_->NowMicros();
  auto idling = Every(timer, 1 * kj::SECONDS, [this, &idle, &idle_since_micros] {
                  if (stopping_) return;  // clients_ goes during the shutdown
                  const uint64_t now = env_->NowMicros();
                  if (config_.idle_exit_s == 0 || clients_->open_connections() > 0) {
                    idle_since_micros = now;
                    return;
                  }
                  if (now - idle_since_micros >= uint64_t{config_.idle_exit_s} * 1000000)
                    idle.fulfiller->fulfill("no client for " +
                                            std::to_string(config_.idle_exit_s) +
                                            " s (idle_exit)");
                }).eagerlyEvaluate([](kj::Exception&& e) {
    spdlog::error("idle check stopped: {}", e.getDescription().cStr());
  });
  const std::string why = stop.exclusiveJoin(kj::mv(failed))
                              .exclusiveJoin(kj::mv(idle.promise))
                              .wait(io_->waitScope);
  Shutdown(why);
  return result;
}

void Daemon::Parts::Shutdown(const std::string& why) {
  stopping_ = true;
  spdlog::info("{}, shutting down: no new connections or streams, draining for up to {} s", why,
               config_.drain_timeout_s);
  sd_notify(0, "STOPPING=1");
  clients_->StopAccepting();
  kj::Timer& timer = io_->provider->getTimer();
  const size_t undrained =
      DrainStreams(timer, *streams_, config_.drain_timeout_s * kj::SECONDS).wait(io_->waitScope);
  if (undrained == 0) {
    spdlog::info("drained: no batch in flight");
  } else {
    spdlog::warn("drain_timeout ({} s) passed with {} batches still being written; closing "
                 "their streams",
                 config_.drain_timeout_s, undrained);
  }
  for (auto& [address, remote] : remotes_) remote.coordinator->Shutdown();
  if (remote_decoders_) remote_decoders_->Shutdown();
  // Peer connections close on their loops while this one runs (their links end here).
  if (peers_) peers_->Stop().wait(io_->waitScope);
  if (decode_rows_) decode_rows_->Stop();
  // Every client connection: their streams close and free their rings.
  clients_.reset();
  // Let file work in flight (a dataset being probed) finish while the event loop it
  // would report to still exists; its caller is gone, so the result is dropped.
  blocking_->join();
  // The streams closed above committed what their trainers consumed: make it durable.
  Status synced = journal_.journal->journal().Sync();
  if (!synced.ok()) spdlog::error("flushing the job journal: {}", synced.message());
  if (peers_) unlink((config_.state_dir + "/peer.port").c_str());
  if (metrics_) unlink((config_.state_dir + "/metrics.port").c_str());
  if (const ShardCacheStats c = shards_->stats(); c.misses + c.range_reads > 0)
    spdlog::info("shard cache: {} hits, {} shards fetched ({} bytes), {} ranges read ({} bytes), "
                 "{} evicted; {} shards ({} bytes) kept in {}",
                 c.hits, c.misses, c.fetched_bytes, c.range_reads, c.range_bytes, c.evictions,
                 c.entries, c.bytes, shards_->dir());
  spdlog::info("emberd stopped");
}

// SIGHUP: the live keys of `loaded` take effect; logs what changed and each refused key.
void Daemon::Parts::Reload(const DaemonConfig& loaded) {
  if (stopping_) return;
  sd_notify(0, "RELOADING=1");
  ConfigReload reload = DiffConfigs(config_, loaded, source_);
  for (const std::string& refused : reload.refused) spdlog::warn("reload: {}", refused);
  config_ = reload.config;
  spdlog::set_level(spdlog::level::from_str(config_.log_level));
  streams_->SetBudget(config_.shm_budget_bytes, config_.default_slots);
  spdlog::info("{}", DescribeChanges(reload));
  sd_notify(0, "READY=1");
}

Result<std::unique_ptr<Daemon>> Daemon::Start(Env* env, DaemonConfig config,
                                              std::string config_source) {
  std::unique_ptr<Daemon> daemon(new Daemon());
  daemon->socket_path_ = config.socket_path;
  daemon->thread_ = std::thread([d = daemon.get(), env, config = std::move(config),
                                 source = std::move(config_source)]() mutable {
    d->Run(env, std::move(config), std::move(source));
  });
  Status started;
  {
    MutexLock lock(&daemon->mu_);
    while (!daemon->started_.has_value()) daemon->changed_.Wait(&daemon->mu_);
    started = *daemon->started_;
  }
  if (!started.ok()) {
    daemon->thread_.join();
    return started;
  }
  return daemon;
}

void Daemon::Run(Env* env, DaemonConfig config, std::string config_source) {
  auto parts = std::make_unique<Parts>(env, std::move(config), std::move(config_source));
  Status opened = parts->Open();
  if (!opened.ok()) {
    parts.reset();  // in reverse order, before Start returns the error
    MutexLock lock(&mu_);
    started_ = opened;
    stopped_ = opened;
    changed_.SignalAll();
    return;
  }
  auto stop = kj::newPromiseAndCrossThreadFulfiller<std::string>();
  {
    MutexLock lock(&mu_);
    peer_port_ = parts->peer_port();
    metrics_port_ = parts->metrics_port();
    parts_ = parts.get();
    stop_ = kj::mv(stop.fulfiller);
    executor_ = kj::getCurrentThreadExecutor().addRef();
    if (stop_why_) stop_->fulfill(kj::cp(*stop_why_));
    started_ = Status::Ok();
    changed_.SignalAll();
  }
  Status served = parts->Serve(kj::mv(stop.promise));
  {
    MutexLock lock(&mu_);
    parts_ = nullptr;
    stop_ = nullptr;
  }
  parts.reset();
  MutexLock lock(&mu_);
  stopped_ = served;
  changed_.SignalAll();
}

void Daemon::Stop(const std::string& why) {
  MutexLock lock(&mu_);
  if (stop_why_) return;
  stop_why_ = why;
  if (stop_ && stop_->isWaiting()) stop_->fulfill(kj::cp(why));
}

void Daemon::Reload(const DaemonConfig& loaded) {
  kj::Own<const kj::Executor> executor;
  Parts* parts = nullptr;
  {
    MutexLock lock(&mu_);
    if (parts_ == nullptr || stop_why_) return;
    executor = executor_->addRef();
    parts = parts_;
  }
  // Runs on the loop while it serves; once the loop is gone executeSync throws instead.
  (void)kj::runCatchingExceptions([&] { executor->executeSync([&] { parts->Reload(loaded); }); });
}

Status Daemon::Wait(std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  if (timeout == std::chrono::milliseconds::max()) {
    while (!stopped_.has_value()) changed_.Wait(&mu_);
    return *stopped_;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!stopped_.has_value() && changed_.WaitUntil(&mu_, deadline)) {
  }
  if (!stopped_.has_value())
    return DeadlineExceeded("emberd on " + socket_path_ + " still runs after " +
                            std::to_string(timeout.count()) + " ms");
  return *stopped_;
}

Daemon::~Daemon() {
  Stop("the daemon object is destroyed");
  if (thread_.joinable()) thread_.join();
}

}  // namespace ember::daemon
