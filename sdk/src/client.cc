// ember::Client: Cap'n Proto RPC on a private thread. Public methods run a lambda on that
// thread through kj::Executor::executeSync and convert kj exceptions to Status there.
#include "ember/client.h"

#include <fcntl.h>
#include <unistd.h>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include <atomic>
#include <condition_variable>
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <mutex>
#include <thread>

#include "common/daemon_status_rpc.h"
#include "common/rpc_status.h"
#include "schemas/ember.capnp.h"
#include "sdk/src/ring_reader.h"

namespace ember {
namespace {

using daemon_status_rpc::FromRpc;
using daemon_status_rpc::FromRpcList;
using daemon_status_rpc::ToRpc;

constexpr unsigned kMaxFdsPerMessage = 4;

// Turns a promise for T into a promise for Result<T>, mapping exceptions to Status.
template <typename T>
kj::Promise<Result<T>> Catch(kj::Promise<T> promise) {
  return promise.then([](T value) { return Result<T>(std::move(value)); },
                      [](kj::Exception&& e) { return Result<T>(rpc_status::FromException(e)); });
}

kj::Promise<Status> CatchVoid(kj::Promise<void> promise) {
  return promise.then([]() { return Status::Ok(); },
                      [](kj::Exception&& e) { return rpc_status::FromException(e); });
}

// A wait's timeoutMs: negative waits are 0 (do not wait), longer ones are capped at the
// schema's 2^32 - 1 ms.
uint32_t TimeoutMs(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return 0;
  return static_cast<uint32_t>(
      std::min<int64_t>(timeout.count(), std::numeric_limits<uint32_t>::max()));
}

}  // namespace

// State that only the RPC thread touches.
struct RpcState {
  kj::AsyncIoContext* io = nullptr;
  rpc::Daemon::Client daemon = nullptr;
  std::map<uint64_t, rpc::Stream::Client> streams;  // held open by live readers
  std::map<std::string, rpc::Job::Client> jobs;      // joined on first use, held until the end
};

namespace {

// The client's membership of `job`: one joinJob per job, on its first use.
kj::Promise<rpc::Job::Client> JobOf(RpcState& s, const std::string& job) {
  auto it = s.jobs.find(job);
  if (it != s.jobs.end()) return rpc::Job::Client(it->second);
  auto req = s.daemon.joinJobRequest();
  req.setJob(job);
  const char* coordinator = std::getenv("EMBER_COORDINATOR");
  if (coordinator != nullptr) req.setCoordinator(coordinator);
  return req.send().then([&s, job](auto response) {
    return rpc::Job::Client(s.jobs.emplace(job, response.getJob()).first->second);
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
               std::chrono::milliseconds call_timeout = std::chrono::milliseconds(0)) {
    socket_path_ = socket_path;
    call_timeout_ = call_timeout;
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
      return R(rpc_status::FromException(e));
    }
  }

  const std::string& socket_path() const { return socket_path_; }
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

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  std::string path = options.socket_path;
  if (path.empty()) {
    const char* env = std::getenv("EMBER_SOCKET");
    path = (env != nullptr && *env != '\0') ? env : kDefaultSocket;
  }
  auto impl = std::make_unique<Impl>();
  EMBER_RETURN_IF_ERROR(impl->Start(path, options.connect_timeout, options.call_timeout));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

const std::string& Client::socket_path() const { return impl_->socket_path(); }

Status Client::Reconnect(std::chrono::milliseconds timeout) {
  auto impl = std::make_unique<Impl>();
  EMBER_RETURN_IF_ERROR(impl->Start(impl_->socket_path(), timeout));
  impl_.swap(impl);
  return Status::Ok();
}
bool Client::connected() const { return impl_->connected(); }

Result<DatasetInfo> Client::AddDataset(const DatasetSpec& spec) {
  return impl_->Call<Result<DatasetInfo>>([&](RpcState& s) {
    auto req = s.daemon.addDatasetRequest();
    ToRpc(spec, req.initSpec());
    return Catch(req.send().then([](auto r) { return FromRpc(r.getInfo()); }));
  });
}

Result<std::vector<DatasetInfo>> Client::ListDatasets() {
  return impl_->Call<Result<std::vector<DatasetInfo>>>([&](RpcState& s) {
    return Catch(s.daemon.listDatasetsRequest().send().then(
        [](auto r) { return FromRpcList(r.getDatasets()); }));
  });
}

Result<DatasetInfo> Client::InspectDataset(const std::string& name) {
  return impl_->Call<Result<DatasetInfo>>([&](RpcState& s) {
    auto req = s.daemon.inspectDatasetRequest();
    req.setDataset(name);
    return Catch(req.send().then([](auto r) { return FromRpc(r.getInfo()); }));
  });
}

Status Client::RemoveDataset(const std::string& name) {
  return impl_->Call<Status>([&](RpcState& s) {
    auto req = s.daemon.removeDatasetRequest();
    req.setDataset(name);
    return CatchVoid(req.send().ignoreResult());
  });
}

Result<DaemonStatus> Client::GetStatus() {
  return impl_->Call<Result<DaemonStatus>>([&](RpcState& s) {
    return Catch(
        s.daemon.statusRequest().send().then([](auto r) { return FromRpc(r.getStatus()); }));
  });
}

namespace {

struct OpenedStream {
  int fd = -1;
  StreamInfo info;
};

}  // namespace

Result<std::unique_ptr<StreamReader>> Client::OpenStream(const StreamOptions& options) {
  auto opened = impl_->Call<Result<OpenedStream>>([&](RpcState& s) {
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
      s.streams.emplace(info.stream_id, response.getStream());
      // The fd belongs to the imported capability: keep it alive until we have a copy.
      rpc::Ring::Client ring = response.getRing();
      auto fd_promise = ring.getFd();
      return fd_promise.then(
          [info, &s, ring = kj::mv(ring)](kj::Maybe<int> maybe_fd) mutable -> OpenedStream {
            KJ_IF_MAYBE(fd, maybe_fd) {
              // The capability owns its fd; keep our own copy.
              OpenedStream opened;
              opened.fd = fcntl(*fd, F_DUPFD_CLOEXEC, 0);
              opened.info = info;
              if (opened.fd < 0) {
                s.streams.erase(info.stream_id);
                kj::throwFatalException(rpc_status::ToException(
                    ErrnoStatus("duplicating the ring fd", errno)));
              }
              return opened;
            }
            s.streams.erase(info.stream_id);
            kj::throwFatalException(rpc_status::ToException(Internal(
                "emberd sent no ring descriptor (is the socket a unix socket?)")));
          });
    }));
  });
  if (!opened.ok()) return opened.status();

  // Closing the reader drops the stream capability on the RPC thread, which closes the
  // daemon's side. If the client is already gone, so is the connection (and the stream).
  const uint64_t id = opened->info.stream_id;
  std::shared_ptr<void> handle(
      nullptr, [executor = std::make_shared<kj::Own<const kj::Executor>>(impl_->executor()),
                state = impl_->state(), id](void*) {
        try {
          (*executor)->executeSync([state, id] { state->streams.erase(id); });
        } catch (const kj::Exception&) {
        }
      });
  auto connected = impl_->connected_flag();
  return sdk::OpenRingReader(opened->fd, opened->info, [connected] { return connected->load(); },
                             std::move(handle));
}

Status Client::KvSet(const std::string& job, const std::string& key, const std::string& value) {
  return impl_->Call<Status>([&](RpcState& s) {
    return CatchVoid(JobOf(s, job).then([&](rpc::Job::Client j) {
      auto req = j.kvSetRequest();
      req.setKey(key);
      req.setValue(
          capnp::Data::Reader(reinterpret_cast<const kj::byte*>(value.data()), value.size()));
      return req.send().ignoreResult();
    }));
  });
}

Result<std::string> Client::KvGet(const std::string& job, const std::string& key,
                                  std::chrono::milliseconds timeout) {
  return impl_->Call<Result<std::string>>([&](RpcState& s) {
    return Catch(JobOf(s, job).then([&](rpc::Job::Client j) {
      auto req = j.kvGetRequest();
      req.setKey(key);
      req.setTimeoutMs(TimeoutMs(timeout));
      return req.send().then([](auto r) {
        auto v = r.getValue();
        return std::string(reinterpret_cast<const char*>(v.begin()), v.size());
      });
    }));
  });
}

Result<int64_t> Client::KvAdd(const std::string& job, const std::string& key, int64_t delta) {
  return impl_->Call<Result<int64_t>>([&](RpcState& s) {
    return Catch(JobOf(s, job).then([&](rpc::Job::Client j) {
      auto req = j.kvAddRequest();
      req.setKey(key);
      req.setDelta(delta);
      return req.send().then([](auto r) { return r.getValue(); });
    }));
  });
}

Result<bool> Client::KvCheck(const std::string& job, const std::vector<std::string>& keys) {
  return impl_->Call<Result<bool>>([&](RpcState& s) {
    return Catch(JobOf(s, job).then([&](rpc::Job::Client j) {
      auto req = j.kvCheckRequest();
      auto list = req.initKeys(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) list.set(i, keys[i]);
      return req.send().then([](auto r) { return r.getPresent(); });
    }));
  });
}

Result<bool> Client::KvDelete(const std::string& job, const std::string& key) {
  return impl_->Call<Result<bool>>([&](RpcState& s) {
    return Catch(JobOf(s, job).then([&](rpc::Job::Client j) {
      auto req = j.kvDeleteRequest();
      req.setKey(key);
      return req.send().then([](auto r) { return r.getDeleted(); });
    }));
  });
}

Status Client::Barrier(const std::string& job, const std::string& name, uint32_t world_size,
                       std::chrono::milliseconds timeout) {
  return impl_->Call<Status>([&](RpcState& s) {
    return CatchVoid(JobOf(s, job).then([&](rpc::Job::Client j) {
      auto req = j.barrierRequest();
      req.setBarrier(name);
      req.setWorldSize(world_size);
      req.setTimeoutMs(TimeoutMs(timeout));
      return req.send().ignoreResult();
    }));
  });
}

Result<int> Client::OpenSharedMemory(const std::string& job, const std::string& name,
                                     uint32_t rank, uint32_t world_size, uint64_t bytes) {
  return impl_->Call<Result<int>>([&](RpcState& s) {
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
