// ember::Client: Cap'n Proto RPC on a private thread. Public methods run a lambda on that
// thread through kj::Executor::executeSync and convert kj exceptions to Status there.
#include "ember/client.h"

#include <fcntl.h>
#include <unistd.h>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "common/daemon_status_rpc.h"
#include "common/rpc_status.h"
#include "schemas/ember.capnp.h"
#include "common/unix_socket.h"
#include "sdk/src/private_daemon.h"
#include "sdk/src/ring_reader.h"

namespace ember {
namespace {

// How long a private daemon (private_daemon.h) may take to start answering.
constexpr std::chrono::milliseconds kPrivateDaemonStartTimeout{30000};

using daemon_status_rpc::FromRpc;
using daemon_status_rpc::FromRpcList;
using daemon_status_rpc::ToRpc;

constexpr unsigned kMaxFdsPerMessage = 4;

// Turns a promise for T into a promise for Result<T>, mapping exceptions to Status (a lost
// connection named as `link`, see rpc_status::FromException).
template <typename T>
kj::Promise<Result<T>> Catch(kj::Promise<T> promise, rpc_status::Link link = {}) {
  return promise.then(
      [](T value) { return Result<T>(std::move(value)); },
      [link](kj::Exception&& e) { return Result<T>(rpc_status::FromException(e, link)); });
}

kj::Promise<Status> CatchVoid(kj::Promise<void> promise, rpc_status::Link link = {}) {
  return promise.then([]() { return Status::Ok(); },
                      [link](kj::Exception&& e) { return rpc_status::FromException(e, link); });
}

// A wait's timeoutMs: negative waits are 0 (do not wait), longer ones are capped at the
// schema's 2^32 - 1 ms.
uint32_t TimeoutMs(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return 0;
  return static_cast<uint32_t>(
      std::min<int64_t>(timeout.count(), std::numeric_limits<uint32_t>::max()));
}

}  // namespace

// What a client did in each job, kept across its connections (Reconnect): what it set,
// set again at a coordinator that restarted, and the rounds of each barrier it passed,
// which a re-sent arrival names (KvStore::Arrive).
struct Client::JobMemory {
  struct Job {
    uint64_t incarnation = 0;                 // the coordinator's at the last join; 0: none
    bool restarted = false;                   // a join found another incarnation
    std::map<std::string, std::string> sets;  // key -> the last value this client set
    std::map<std::string, int64_t> adds;      // key -> the sum of its KvAdd deltas since
    std::map<std::string, uint64_t> rounds;   // barrier -> the last round it passed
  };
  std::mutex mu;
  std::map<std::string, Job> jobs;  // guarded by mu
  // This client as a barrier participant (KvStore::Arrive's member).
  const uint64_t member = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}() ^
                          static_cast<uint64_t>(
                              std::chrono::steady_clock::now().time_since_epoch().count());

  uint64_t Incarnation(const std::string& job) {
    std::lock_guard<std::mutex> lock(mu);
    return jobs[job].incarnation;
  }
  // The round a barrier arrival names: the one after the last this client passed; 0 (the
  // open one) before it passed any.
  uint64_t NextRound(const std::string& job, const std::string& barrier) {
    std::lock_guard<std::mutex> lock(mu);
    auto& rounds = jobs[job].rounds;
    auto it = rounds.find(barrier);
    return it == rounds.end() ? 0 : it->second + 1;
  }
  void Passed(const std::string& job, const std::string& barrier, uint64_t round) {
    std::lock_guard<std::mutex> lock(mu);
    jobs[job].rounds[barrier] = round;
  }
  void Set(const std::string& job, const std::string& key, const std::string& value) {
    std::lock_guard<std::mutex> lock(mu);
    Job& j = jobs[job];
    j.sets[key] = value;
    j.adds.erase(key);
  }
  void Added(const std::string& job, const std::string& key, int64_t delta) {
    std::lock_guard<std::mutex> lock(mu);
    Job& j = jobs[job];
    j.adds[key] += delta;
    j.sets.erase(key);
  }
  void Deleted(const std::string& job, const std::string& key) {
    std::lock_guard<std::mutex> lock(mu);
    Job& j = jobs[job];
    j.sets.erase(key);
    j.adds.erase(key);
  }
};

// State that only the RPC thread touches.
struct RpcState {
  kj::AsyncIoContext* io = nullptr;
  rpc::Daemon::Client daemon = nullptr;
  std::map<uint64_t, rpc::Stream::Client> streams;  // held open by live readers
  std::map<std::string, rpc::Job::Client> jobs;      // joined on first use, held until the end
  Client::JobMemory* memory = nullptr;               // the client's, outlives this
  rpc_status::Link link;      // the daemon's socket, for what a lost connection says
  rpc_status::Link job_link;  // and the coordinator beyond it, for the jobs' calls
};

namespace {

// The membership `job` joined with the coordinator's `incarnation` (0: unknown): after a
// coordinator restart, first sets again what this client had set.
kj::Promise<rpc::Job::Client> Joined(RpcState& s, const std::string& job, rpc::Job::Client cap,
                                     uint64_t incarnation) {
  std::map<std::string, std::string> sets;
  std::map<std::string, int64_t> adds;
  {
    std::lock_guard<std::mutex> lock(s.memory->mu);
    Client::JobMemory::Job& m = s.memory->jobs[job];
    if (m.incarnation != 0 && incarnation != 0 && incarnation != m.incarnation) {
      m.restarted = true;
      sets = m.sets;
      adds = m.adds;
    }
    if (incarnation != 0) m.incarnation = incarnation;
  }
  auto again = kj::heapArrayBuilder<kj::Promise<void>>(sets.size() + adds.size());
  for (const auto& [key, value] : sets) {
    auto req = cap.kvSetRequest();
    req.setKey(key);
    req.setValue(
        capnp::Data::Reader(reinterpret_cast<const kj::byte*>(value.data()), value.size()));
    again.add(req.send().ignoreResult());
  }
  for (const auto& [key, sum] : adds) {
    auto req = cap.kvAddRequest();
    req.setKey(key);
    req.setDelta(sum);
    again.add(req.send().ignoreResult());
  }
  return kj::joinPromises(again.finish()).then([&s, job, cap = kj::mv(cap)]() mutable {
    return rpc::Job::Client(s.jobs.emplace(job, kj::mv(cap)).first->second);
  });
}

// The client's membership of `job`: one joinJob per job, on its first use, and again
// after the membership was dropped (Impl::ForgetJob: a lost coordinator link).
kj::Promise<rpc::Job::Client> JobOf(RpcState& s, const std::string& job) {
  auto it = s.jobs.find(job);
  if (it != s.jobs.end()) return rpc::Job::Client(it->second);
  auto req = s.daemon.joinJobRequest();
  req.setJob(job);
  const char* coordinator = std::getenv("EMBER_COORDINATOR");
  if (coordinator != nullptr) req.setCoordinator(coordinator);
  rpc::Job::Client joined = req.send().getJob();
  auto incarnation = joined.incarnationRequest().send().then(
      [](auto response) -> uint64_t { return response.getId(); },
      [](kj::Exception&& e) -> uint64_t {
        if (e.getType() == kj::Exception::Type::UNIMPLEMENTED) return 0;  // an older emberd
        kj::throwFatalException(kj::mv(e));
      });
  return incarnation.then([&s, job, joined = kj::mv(joined)](uint64_t id) mutable {
    return Joined(s, job, kj::mv(joined), id);
  });
}

}  // namespace

class Client::Impl {
 public:
  ~Impl() {
    if (executor_) {
      try {
        executor_->executeSync([this] { shutdown_->fulfill(); });
      } catch (const kj::Exception&) {
        // The loop already ended.
      }
    }
    if (thread_.joinable()) thread_.join();
  }

  Status Start(const std::string& socket_path, std::chrono::milliseconds timeout,
               std::chrono::milliseconds call_timeout, Client::JobMemory* memory) {
    socket_path_ = socket_path;
    call_timeout_ = call_timeout;
    memory_ = memory;
    thread_ = std::thread([this, timeout] { Run(timeout); });
    std::unique_lock<std::mutex> lock(mu_);
    started_cv_.wait(lock, [this] { return started_; });
    return start_status_;
  }

  // Runs `fn` (returning kj::Promise<R>) on the RPC thread and waits for R. With a call
  // timeout, the answer races a timer whose promise yields no value: the timer winning
  // (the answer is then cancelled) is kDeadlineExceeded, told apart from any exception.
  template <typename R, typename Fn>
  R Call(Fn&& fn) {
    if (!connected_->load()) return R(Unavailable("not connected to emberd at " + socket_path_));
    try {
      return executor_->executeSync([&]() -> kj::Promise<R> {
        if (call_timeout_.count() <= 0) return fn(*state_);
        kj::Promise<std::optional<R>> answer =
            fn(*state_).then([](R value) { return std::optional<R>(std::move(value)); });
        kj::Promise<std::optional<R>> expired =
            state_->io->provider->getTimer()
                .afterDelay(call_timeout_.count() * kj::MILLISECONDS)
                .then([] { return std::optional<R>(); });
        return answer.exclusiveJoin(kj::mv(expired)).then([this](std::optional<R> value) {
          if (value) return std::move(*value);
          return R(DeadlineExceeded("emberd at " + socket_path_ + " did not answer within " +
                                    std::to_string(call_timeout_.count()) + " ms"));
        });
      });
    } catch (const kj::Exception& e) {
      return R(rpc_status::FromException(e, {"emberd at " + socket_path_, ""}));
    }
  }

  // Drops the membership of `job` (its coordinator link was lost): the next call joins
  // again.
  void ForgetJob(const std::string& job) {
    (void)Call<Status>([&](RpcState& s) {
      s.jobs.erase(job);
      return kj::Promise<Status>(Status::Ok());
    });
  }

  const std::string& socket_path() const { return socket_path_; }
  std::chrono::milliseconds call_timeout() const { return call_timeout_; }
  bool connected() const { return connected_->load(); }
  std::shared_ptr<std::atomic<bool>> connected_flag() const { return connected_; }
  kj::Own<const kj::Executor> executor() const { return executor_->addRef(); }
  RpcState* state() const { return state_; }

 private:
  void Finish(Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    start_status_ = std::move(status);
    started_ = true;
    started_cv_.notify_all();
  }

  void Run(std::chrono::milliseconds timeout) {
    auto io = kj::setupAsyncIo();
    RpcState state;
    state.io = &io;
    state.memory = memory_;
    state.link = {"emberd at " + socket_path_, ""};
    const char* coordinator = std::getenv("EMBER_COORDINATOR");
    state.job_link = {state.link.next, coordinator != nullptr && *coordinator != '\0'
                                           ? std::string("the job's coordinator ") + coordinator
                                           : std::string("the job's coordinator")};
    kj::Own<kj::AsyncIoStream> stream;
    const std::string where = "cannot connect to emberd at " + socket_path_;
    KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] {
      auto address = io.provider->getNetwork()
                         .parseAddress(kj::str("unix:", socket_path_.c_str()))
                         .wait(io.waitScope);
      stream = io.provider->getTimer()
                   .timeoutAfter(timeout.count() * kj::MILLISECONDS, address->connect())
                   .wait(io.waitScope);
    })) {
      std::string why = e->getDescription().cStr();
      Finish(Unavailable(where + ": " + why + " (is emberd running? set --socket or EMBER_SOCKET)"));
      return;
    }
    auto caps = stream.downcast<kj::AsyncCapabilityStream>();
    capnp::TwoPartyClient client(*caps, kMaxFdsPerMessage);
    state.daemon = client.bootstrap().castAs<rpc::Daemon>();
    auto disconnected = client.onDisconnect()
                            .then([this] { connected_->store(false); },
                                  [this](kj::Exception&&) { connected_->store(false); })
                            .eagerlyEvaluate(nullptr);
    auto shutdown = kj::newPromiseAndFulfiller<void>();
    shutdown_ = kj::mv(shutdown.fulfiller);
    executor_ = kj::getCurrentThreadExecutor().addRef();
    state_ = &state;
    connected_->store(true);
    Finish(Status::Ok());
    shutdown.promise.wait(io.waitScope);
    connected_->store(false);
    state.streams.clear();
    state.jobs.clear();
  }

  std::string socket_path_;
  std::chrono::milliseconds call_timeout_{0};
  Client::JobMemory* memory_ = nullptr;  // the client's
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable started_cv_;
  bool started_ = false;
  Status start_status_;
  std::shared_ptr<std::atomic<bool>> connected_ = std::make_shared<std::atomic<bool>>(false);
  kj::Own<const kj::Executor> executor_;
  kj::Own<kj::PromiseFulfiller<void>> shutdown_;  // RPC thread only
  RpcState* state_ = nullptr;                      // RPC thread only
};

Client::Client(std::shared_ptr<Impl> impl, std::chrono::milliseconds rejoin_timeout)
    : socket_path_(impl->socket_path()),
      impl_(std::move(impl)),
      rejoin_timeout_(rejoin_timeout) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  std::string path = options.socket_path;
  if (path.empty()) {
    const char* env = std::getenv("EMBER_SOCKET");
    path = (env != nullptr && *env != '\0') ? env : kDefaultSocket;
    // No daemon named and none serving the node: the user's own (private_daemon.h).
    if (path == kDefaultSocket && !UnixSocketAnswers(path)) {
      const std::string none = "no emberd answers on " + std::string(kDefaultSocket) +
                               " and EMBER_SOCKET is unset; ";
      if (!options.start_private_daemon) {
        Result<std::string> running = RunningPrivateDaemon();
        if (!running.ok()) return Unavailable(none + running.status().message());
        path = *running;
      } else if (AutostartAllowed()) {
        Result<std::string> started =
            EnsurePrivateDaemon(std::max(options.connect_timeout, kPrivateDaemonStartTimeout));
        if (!started.ok())
          return Unavailable(none + "starting a private one failed (" +
                             started.status().message() +
                             "); set EMBER_SOCKET, or EMBER_AUTOSTART=0 to not start one");
        path = *started;
      }
    }
  }
  auto memory = std::make_shared<JobMemory>();
  auto impl = std::make_shared<Impl>();
  EMBER_RETURN_IF_ERROR(
      impl->Start(path, options.connect_timeout, options.call_timeout, memory.get()));
  std::unique_ptr<Client> client(new Client(std::move(impl), options.rejoin_timeout));
  client->memory_ = std::move(memory);
  return client;
}

const std::string& Client::socket_path() const { return socket_path_; }

std::shared_ptr<Client::Impl> Client::impl() const {
  std::lock_guard<std::mutex> lock(impl_mu_);
  return impl_;
}

Status Client::Reconnect(std::chrono::milliseconds timeout) {
  auto fresh = std::make_shared<Impl>();
  EMBER_RETURN_IF_ERROR(fresh->Start(socket_path_, timeout, impl()->call_timeout(), memory_.get()));
  std::lock_guard<std::mutex> lock(impl_mu_);
  impl_.swap(fresh);  // the old one goes with its last call
  return Status::Ok();
}
bool Client::connected() const { return impl()->connected(); }

Status Client::RetryJob(const std::string& job, std::chrono::milliseconds timeout,
                        const std::function<Status(Impl&, std::chrono::milliseconds)>& attempt) {
  using std::chrono::milliseconds;
  using std::chrono::steady_clock;
  timeout = std::max(milliseconds(0), timeout);
  const steady_clock::time_point deadline = steady_clock::now() + timeout;
  milliseconds pause(50);
  for (bool first = true;; first = false) {
    const std::shared_ptr<Impl> impl = this->impl();
    const milliseconds left =
        first ? timeout
              : std::max(milliseconds(0), std::chrono::ceil<milliseconds>(
                                               deadline - steady_clock::now()));
    Status status = attempt(*impl, left);
    if (status.ok() || status.code() != StatusCode::kUnavailable ||
        steady_clock::now() >= deadline)
      return status;
    if (!impl->connected()) {
      // The daemon is gone (a restart): connect again, unless another call already did.
      if (this->impl() == impl)
        (void)Reconnect(std::min(milliseconds(1000), std::chrono::duration_cast<milliseconds>(
                                                         deadline - steady_clock::now())));
    } else {
      impl->ForgetJob(job);  // the daemon is fine: its link to the coordinator is not
    }
    const auto rest =
        std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
    if (rest <= milliseconds(0)) return status;
    std::this_thread::sleep_for(std::min(pause, rest));
    pause = std::min(pause * 2, milliseconds(1000));
  }
}

Result<DatasetInfo> Client::AddDataset(const DatasetSpec& spec) {
  return impl()->Call<Result<DatasetInfo>>([&](RpcState& s) {
    auto req = s.daemon.addDatasetRequest();
    ToRpc(spec, req.initSpec());
    return Catch(req.send().then([](auto r) { return FromRpc(r.getInfo()); }));
  });
}

Result<std::vector<DatasetInfo>> Client::ListDatasets() {
  return impl()->Call<Result<std::vector<DatasetInfo>>>([&](RpcState& s) {
    return Catch(s.daemon.listDatasetsRequest().send().then(
        [](auto r) { return FromRpcList(r.getDatasets()); }));
  });
}

Result<DatasetInfo> Client::InspectDataset(const std::string& name) {
  return impl()->Call<Result<DatasetInfo>>([&](RpcState& s) {
    auto req = s.daemon.inspectDatasetRequest();
    req.setDataset(name);
    return Catch(req.send().then([](auto r) { return FromRpc(r.getInfo()); }));
  });
}

Status Client::RemoveDataset(const std::string& name) {
  return impl()->Call<Status>([&](RpcState& s) {
    auto req = s.daemon.removeDatasetRequest();
    req.setDataset(name);
    return CatchVoid(req.send().ignoreResult());
  });
}

Result<DaemonStatus> Client::GetStatus() {
  return impl()->Call<Result<DaemonStatus>>([&](RpcState& s) {
    return Catch(
        s.daemon.statusRequest().send().then([](auto r) { return FromRpc(r.getStatus()); }));
  });
}

Result<RegistrationProgress> Client::GetRegistrationProgress(const std::string& name) {
  return impl()->Call<Result<RegistrationProgress>>([&](RpcState& s) {
    auto req = s.daemon.registrationProgressRequest();
    req.setDataset(name);
    return Catch(req.send().then([](auto r) { return FromRpc(r.getProgress()); }));
  });
}

Result<DatasetDetails> Client::DescribeDataset(const std::string& name) {
  return impl()->Call<Result<DatasetDetails>>([&](RpcState& s) {
    auto req = s.daemon.datasetDetailsRequest();
    req.setDataset(name);
    return Catch(req.send().then([](auto r) { return FromRpc(r.getDetails()); }));
  });
}

Result<ShardCacheStatus> Client::GetShardCache() {
  return impl()->Call<Result<ShardCacheStatus>>([&](RpcState& s) {
    return Catch(
        s.daemon.shardCacheRequest().send().then([](auto r) { return FromRpc(r.getCache()); }));
  });
}

Result<ShardCacheCleared> Client::ClearShardCache() {
  return impl()->Call<Result<ShardCacheCleared>>([&](RpcState& s) {
    return Catch(s.daemon.clearShardCacheRequest().send().then(
        [](auto r) { return FromRpc(r.getCleared()); }));
  });
}

namespace {

struct OpenedStream {
  int fd = -1;
  int shared_fd = -1;  // the share group's rows; -1: none
  StreamInfo info;
};

// A copy (O_CLOEXEC) of the descriptor that `cap` carries (the capability owns its own,
// so it is kept alive until the copy is made); throws, naming `what`, if it carries none.
kj::Promise<int> CopyFd(rpc::Ring::Client cap, std::string what) {
  auto fd_promise = cap.getFd();
  return fd_promise.then([cap = kj::mv(cap), what](kj::Maybe<int> maybe_fd) mutable -> int {
    KJ_IF_MAYBE(fd, maybe_fd) {
      const int copy = fcntl(*fd, F_DUPFD_CLOEXEC, 0);
      if (copy < 0)
        kj::throwFatalException(
            rpc_status::ToException(ErrnoStatus("duplicating the " + what + " fd", errno)));
      return copy;
    }
    kj::throwFatalException(rpc_status::ToException(
        Internal("emberd sent no " + what + " descriptor (is the socket a unix socket?)")));
  });
}

}  // namespace

Result<std::unique_ptr<StreamReader>> Client::OpenStream(const StreamOptions& options) {
  const std::shared_ptr<Impl> impl = this->impl();
  auto opened = impl->Call<Result<OpenedStream>>([&](RpcState& s) {
    auto req = s.daemon.openStreamRequest();
    auto r = req.initRequest();
    r.setJob(options.job);
    r.setDataset(options.dataset);
    r.setBatchSize(options.batch_size);
    r.setSeed(options.seed);
    r.setRank(options.rank);
    r.setWorldSize(options.world_size);
    r.setEpochs(options.epochs);
    r.setShuffle(options.shuffle);
    r.setSlots(options.slots);
    r.setStartEpoch(options.start_epoch);
    r.setStartPosition(options.start_position);
    r.setFingerprint(options.fingerprint);
    r.setSampleIds(options.sample_ids);
    r.setRejoin(options.rejoin);
    r.setRejoinEpoch(options.rejoin_epoch);
    r.setRejoinReceived(options.rejoin_received);
    r.setShare(options.share);
    const char* coordinator_env = std::getenv("EMBER_COORDINATOR");
    r.setCoordinator(!options.coordinator.empty() ? options.coordinator
                     : coordinator_env != nullptr ? coordinator_env
                                                  : "");
    return Catch(req.send().then([&s](auto response) {
      StreamInfo info;
      auto i = response.getInfo();
      info.stream_id = i.getStreamId();
      info.slot_count = i.getSlotCount();
      info.slot_size = i.getSlotSize();
      info.ring_bytes = i.getRingBytes();
      info.batches_per_epoch = i.getBatchesPerEpoch();
      info.samples_per_epoch = i.getSamplesPerEpoch();
      info.fingerprint = i.getFingerprint();
      info.share = std::string(i.getShare().cStr(), i.getShare().size());
      info.start_epoch = i.getStartEpoch();
      info.epochs = i.getEpochs();
      s.streams.emplace(info.stream_id, response.getStream());
      kj::Maybe<rpc::Ring::Client> shared;
      if (response.hasShared()) shared = response.getShared();
      return CopyFd(response.getRing(), "ring")
          .then([info, shared = kj::mv(shared)](int fd) mutable -> kj::Promise<OpenedStream> {
            OpenedStream opened;
            opened.fd = fd;
            opened.info = info;
            KJ_IF_MAYBE(cap, shared) {
              return CopyFd(kj::mv(*cap), "share group").then(
                  [opened](int shared_fd) mutable {
                    opened.shared_fd = shared_fd;
                    return opened;
                  },
                  [fd](kj::Exception&& e) -> OpenedStream {
                    close(fd);
                    kj::throwFatalException(kj::mv(e));
                  });
            }
            return opened;
          })
          .catch_([&s, id = info.stream_id](kj::Exception&& e) -> OpenedStream {
            s.streams.erase(id);
            kj::throwFatalException(kj::mv(e));
          });
    }));
  });
  if (!opened.ok()) return opened.status();

  // Closing the reader drops the stream capability on the RPC thread, which closes the
  // daemon's side. If the client is already gone, so is the connection (and the stream).
  const uint64_t id = opened->info.stream_id;
  std::shared_ptr<void> handle(
      nullptr, [executor = std::make_shared<kj::Own<const kj::Executor>>(impl->executor()),
                state = impl->state(), id](void*) {
        try {
          (*executor)->executeSync([state, id] { state->streams.erase(id); });
        } catch (const kj::Exception&) {
        }
      });
  auto connected = impl->connected_flag();
  return sdk::OpenRingReader(opened->fd, opened->shared_fd, opened->info,
                             [connected] { return connected->load(); }, std::move(handle));
}

Status Client::KvSet(const std::string& job, const std::string& key, const std::string& value) {
  Status set = RetryJob(job, rejoin_timeout_, [&](Impl& impl, std::chrono::milliseconds) {
    return impl.Call<Status>([&](RpcState& s) {
      return CatchVoid(JobOf(s, job).then([&](rpc::Job::Client j) {
        auto req = j.kvSetRequest();
        req.setKey(key);
        req.setValue(
            capnp::Data::Reader(reinterpret_cast<const kj::byte*>(value.data()), value.size()));
        return req.send().ignoreResult();
      }), s.job_link);
    });
  });
  if (set.ok()) memory_->Set(job, key, value);
  return set;
}

Result<std::string> Client::KvGet(const std::string& job, const std::string& key,
                                  std::chrono::milliseconds timeout) {
  Result<std::string> got = Unavailable("unset");
  Status status = RetryJob(job, timeout, [&](Impl& impl, std::chrono::milliseconds left) {
    got = impl.Call<Result<std::string>>([&](RpcState& s) {
      return Catch(JobOf(s, job).then([&](rpc::Job::Client j) {
        auto req = j.kvGetRequest();
        req.setKey(key);
        req.setTimeoutMs(TimeoutMs(left));
        return req.send().then([](auto r) {
          auto v = r.getValue();
          return std::string(reinterpret_cast<const char*>(v.begin()), v.size());
        });
      }), s.job_link);
    });
    return got.ok() ? Status::Ok() : got.status();
  });
  if (!status.ok()) return status;
  return got;
}

Result<int64_t> Client::KvAdd(const std::string& job, const std::string& key, int64_t delta) {
  Result<int64_t> sum = Unavailable("unset");
  Status status = RetryJob(job, rejoin_timeout_, [&](Impl& impl, std::chrono::milliseconds) {
    sum = impl.Call<Result<int64_t>>([&](RpcState& s) {
      return Catch(JobOf(s, job).then([&](rpc::Job::Client j) {
        auto req = j.kvAddRequest();
        req.setKey(key);
        req.setDelta(delta);
        return req.send().then([](auto r) { return r.getValue(); });
      }), s.job_link);
    });
    return sum.ok() ? Status::Ok() : sum.status();
  });
  if (!status.ok()) return status;
  memory_->Added(job, key, delta);
  return sum;
}

Result<bool> Client::KvCheck(const std::string& job, const std::vector<std::string>& keys) {
  Result<bool> present = Unavailable("unset");
  Status status = RetryJob(job, rejoin_timeout_, [&](Impl& impl, std::chrono::milliseconds) {
    present = impl.Call<Result<bool>>([&](RpcState& s) {
      return Catch(JobOf(s, job).then([&](rpc::Job::Client j) {
        auto req = j.kvCheckRequest();
        auto list = req.initKeys(keys.size());
        for (size_t i = 0; i < keys.size(); ++i) list.set(i, keys[i]);
        return req.send().then([](auto r) { return r.getPresent(); });
      }), s.job_link);
    });
    return present.ok() ? Status::Ok() : present.status();
  });
  if (!status.ok()) return status;
  return present;
}

Result<bool> Client::KvDelete(const std::string& job, const std::string& key) {
  Result<bool> deleted = Unavailable("unset");
  Status status = RetryJob(job, rejoin_timeout_, [&](Impl& impl, std::chrono::milliseconds) {
    deleted = impl.Call<Result<bool>>([&](RpcState& s) {
      return Catch(JobOf(s, job).then([&](rpc::Job::Client j) {
        auto req = j.kvDeleteRequest();
        req.setKey(key);
        return req.send().then([](auto r) { return r.getDeleted(); });
      }), s.job_link);
    });
    return deleted.ok() ? Status::Ok() : deleted.status();
  });
  if (!status.ok()) return status;
  memory_->Deleted(job, key);
  return deleted;
}

Status Client::Barrier(const std::string& job, const std::string& name, uint32_t world_size,
                       std::chrono::milliseconds timeout) {
  const uint64_t incarnation = memory_->Incarnation(job);
  Status passed = RetryJob(job, timeout, [&](Impl& impl, std::chrono::milliseconds left) {
    const uint64_t round = memory_->NextRound(job, name);
    Result<uint64_t> done = impl.Call<Result<uint64_t>>([&](RpcState& s) {
      return Catch(JobOf(s, job).then([&](rpc::Job::Client j) {
        auto req = j.barrierRequest();
        req.setBarrier(name);
        req.setWorldSize(world_size);
        req.setTimeoutMs(TimeoutMs(left));
        req.setRound(round);
        req.setMember(memory_->member);
        return req.send().then([](auto r) { return r.getRound(); });
      }), s.job_link);
    });
    if (!done.ok()) return done.status();
    memory_->Passed(job, name, *done);
    return Status::Ok();
  });
  if (passed.code() == StatusCode::kDeadlineExceeded && incarnation != 0 &&
      memory_->Incarnation(job) != incarnation)
    return Status(passed.code(),
                  passed.message() +
                      " (the job's coordinator restarted meanwhile; a member that passed this "
                      "round before the restart arrives again only at its next barrier)");
  return passed;
}

Result<int> Client::OpenSharedMemory(const std::string& job, const std::string& name,
                                     uint32_t rank, uint32_t world_size, uint64_t bytes) {
  return impl()->Call<Result<int>>([&](RpcState& s) {
    return Catch(JobOf(s, job).then([&](rpc::Job::Client j) {
      auto req = j.openSharedMemoryRequest();
      req.setSegment(name);
      req.setRank(rank);
      req.setWorldSize(world_size);
      req.setBytes(bytes);
      return req.send().then([](auto response) {
        // The fd belongs to the imported capability: keep it alive until we have a copy.
        rpc::SharedMemory::Client memory = response.getMemory();
        auto fd_promise = memory.getFd();
        return fd_promise.then([memory = kj::mv(memory)](kj::Maybe<int> maybe_fd) -> int {
          KJ_IF_MAYBE(fd, maybe_fd) {
            const int copy = fcntl(*fd, F_DUPFD_CLOEXEC, 0);
            if (copy < 0) {
              kj::throwFatalException(rpc_status::ToException(
                  ErrnoStatus("duplicating the shared memory fd", errno)));
            }
            return copy;
          }
          kj::throwFatalException(rpc_status::ToException(
              Internal("emberd sent no shared memory descriptor (is the socket a unix socket?)")));
        });
      });
    }));
  });
}

}  // namespace ember
