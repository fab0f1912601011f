#include "ember/nccl_communicator.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sdk/sync/communicator_args.h"
#include "sdk/sync/ember_store.h"
#include "sdk/sync/error_message.h"
#include "sdk/sync/same_world.h"

namespace ember {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::microseconds kPollInterval{20};
// How long a wait for the GPU or NCCL yields between polls before it sleeps: a small
// collective is done in tens of microseconds, a sleep lasts 50 us or more in practice.
constexpr std::chrono::microseconds kSpinTime{200};

// Between two polls of a wait that began at `since`.
void PollPause(Clock::time_point since) {
  if (Clock::now() - since < kSpinTime) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(kPollInterval);
  }
}

std::string CudaMessage(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

std::string NcclMessage(ncclResult_t result, ncclComm_t comm) {
  std::string message = ncclGetErrorString(result);
  const char* detail = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  if (detail != nullptr && *detail != '\0') message += std::string(" (") + detail + ")";
  return message;
}

// Makes a device current on the calling thread, and the one that was current again at
// scope exit: a thread that drives several GPUs keeps the device it had chosen.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    result_ = cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

  cudaError_t result() const { return result_; }

 private:
  int previous_ = -1;
  cudaError_t result_ = cudaSuccess;
};

// The NCCL type of a dtype; bool only where nothing is summed (a broadcast moves its
// bytes as uint8).
std::optional<ncclDataType_t> ToNccl(torch::ScalarType type, bool reduce) {
  switch (type) {
    case torch::kBool: return reduce ? std::nullopt : std::optional(ncclUint8);
    case torch::kFloat: return ncclFloat32;
    case torch::kDouble: return ncclFloat64;
    case torch::kHalf: return ncclFloat16;
    case torch::kBFloat16: return ncclBfloat16;
    case torch::kInt: return ncclInt32;
    case torch::kLong: return ncclInt64;
    case torch::kByte: return ncclUint8;
    case torch::kChar: return ncclInt8;
    default: return std::nullopt;
  }
}

// One NCCL communicator in non-blocking mode plus its stream. Every wait polls against
// a deadline; a failure aborts the communicator, and later calls fail at once.
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int rank, int world_size, int device, std::chrono::milliseconds timeout,
                   std::string name)
      : rank_(rank), world_size_(world_size), device_(device), timeout_(timeout),
        name_(std::move(name)) {}

  ~NcclCommunicator() override {
    if (comm_ != nullptr) {
      bool finalized = false;
      ncclResult_t result = ncclInternalError;
      const DeviceScope on_device(device_);
      if (broken_.empty() && on_device.result() == cudaSuccess) {
        result = ncclCommFinalize(comm_);
      }
      if (result == ncclSuccess || result == ncclInProgress) {
        const Clock::time_point deadline = Clock::now() + timeout_;
        ncclResult_t state = ncclInProgress;
        while (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state == ncclInProgress &&
               Clock::now() < deadline) {
          std::this_thread::sleep_for(kPollInterval);
        }
        finalized = state == ncclSuccess;
      }
      if (finalized) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Rendezvous and NCCL initialization; throws on failure (the destructor cleans up).
  void Init(c10d::Store& store) {
    RunStore("init", "checking that every rank has the same world size", [&] {
      sdk::CheckSameWorld(store, "ember/nccl/" + name_, rank_, world_size_, timeout_);
    });
    const Clock::time_point deadline = Clock::now() + timeout_;
    const DeviceScope on_device(device_);
    CheckCuda(on_device.result(), "init", "cudaSetDevice(" + std::to_string(device_) + ")");

    const std::string key = "ember/nccl/" + name_ + "/unique_id";
    ncclUniqueId id;
    if (rank_ == 0) {
      CheckNccl(ncclGetUniqueId(&id), "init", "ncclGetUniqueId");
      std::vector<uint8_t> bytes(sizeof(id));
      std::memcpy(bytes.data(), &id, sizeof(id));
      RunStore("init", "publishing the NCCL id under '" + key + "'",
               [&] { store.set(key, bytes); });
    } else {
      std::vector<uint8_t> bytes;
      RunStore("init", "waiting for rank 0's NCCL id under '" + key + "'", [&] {
        store.wait({key}, timeout_);
        bytes = store.get(key);
      });
      TORCH_CHECK(bytes.size() == sizeof(id), Where("init"), ": the NCCL id under '", key,
                  "' has ", bytes.size(), " bytes, expected ", sizeof(id));
      std::memcpy(&id, bytes.data(), sizeof(id));
    }

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    CheckNccl(ncclCommInitRankConfig(&comm_, world_size_, id, rank_, &config), "init",
              "ncclCommInitRankConfig");
    AwaitComm("init", deadline);
    CheckCuda(cudaStreamCreate(&stream_), "init", "cudaStreamCreate");
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  std::shared_ptr<PendingCollective> AllReduceSumAsync(
      std::vector<torch::Tensor>& tensors) override {
    const std::string op = "all-reduce";
    cudaEvent_t event = Launch(op, /*reduce=*/true, tensors,
                               [this](void* data, size_t count, ncclDataType_t type) {
                                 return ncclAllReduce(data, data, count, type, ncclSum, comm_,
                                                      stream_);
                               });
    return std::make_shared<NcclPending>(this, op, tensors, event);
  }

  void Broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    TORCH_CHECK(root >= 0 && root < world_size_, Where("broadcast"), ": root ", root,
                " is not a rank of this world");
    const std::string op = "broadcast";
    cudaEvent_t event =
        Launch(op, /*reduce=*/false, tensors,
               [this, root](void* data, size_t count, ncclDataType_t type) {
                 return ncclBroadcast(data, data, count, type, root, comm_, stream_);
               });
    NcclPending(this, op, tensors, event).Wait();
  }

 private:
  // Holds the tensors until their collective is done; owns the event recorded after it.
  class NcclPending final : public PendingCollective {
   public:
    NcclPending(NcclCommunicator* comm, std::string op, std::vector<torch::Tensor> tensors,
                cudaEvent_t event)
        : comm_(comm), op_(std::move(op)), tensors_(std::move(tensors)), event_(event) {}
    // Dropped without Wait: the tensors must outlive the collective (the caching
    // allocator could hand their memory out again while NCCL still writes it), so this
    // waits as Wait would, up to the timeout; a failure aborts the communicator, which
    // stops the collective.
    ~NcclPending() override {
      if (event_ == nullptr) return;
      try {
        comm_->AwaitEvent(op_, event_, Clock::now() + comm_->timeout_);
      } catch (const std::exception&) {
      }
      cudaEventDestroy(event_);
    }

    void Wait() override {
      if (event_ == nullptr) return;
      comm_->AwaitEvent(op_, event_, Clock::now() + comm_->timeout_);
      cudaEventDestroy(event_);
      event_ = nullptr;
      tensors_.clear();
    }

   private:
    NcclCommunicator* const comm_;
    const std::string op_;
    std::vector<torch::Tensor> tensors_;
    cudaEvent_t event_;
  };

  std::string Where(const std::string& op) const {
    return "nccl " + op + " (group '" + name_ + "', rank " + std::to_string(rank_) + " of " +
           std::to_string(world_size_) + ", cuda device " + std::to_string(device_) + ")";
  }

  // Records the error, aborts the communicator (so that peers and our stream stop) and
  // throws.
  [[noreturn]] void Fail(const std::string& op, const std::string& why) {
    broken_ = why;
    if (comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    TORCH_CHECK(false, Where(op), ": ", why);
    std::abort();  // unreachable: TORCH_CHECK(false) throws
  }

  void CheckCuda(cudaError_t error, const std::string& op, const std::string& call) {
    if (error != cudaSuccess) Fail(op, call + ": " + CudaMessage(error));
  }

  // ncclInProgress is success in non-blocking mode: the work finishes asynchronously.
  void CheckNccl(ncclResult_t result, const std::string& op, const std::string& call) {
    if (result != ncclSuccess && result != ncclInProgress) {
      Fail(op, call + ": " + NcclMessage(result, comm_));
    }
  }

  void RunStore(const std::string& op, const std::string& what, const std::function<void()>& f) {
    try {
      f();
    } catch (const std::exception& e) {
      Fail(op, what + ": " + sdk::ErrorMessage(e));
    }
  }

  void CheckDeadline(const std::string& op, Clock::time_point deadline, const char* waiting) {
    if (Clock::now() > deadline) {
      Fail(op, std::string("timed out after ") + std::to_string(timeout_.count()) +
                   " ms waiting for " + waiting + " (a peer may have died or stopped answering)");
    }
  }

  // Waits until the communicator has no call in progress.
  void AwaitComm(const std::string& op, Clock::time_point deadline) {
    const Clock::time_point since = Clock::now();
    while (true) {
      ncclResult_t state = ncclSuccess;
      CheckNccl(ncclCommGetAsyncError(comm_, &state), op, "ncclCommGetAsyncError");
      if (state == ncclSuccess) return;
      CheckNccl(state, op, "NCCL");
      CheckDeadline(op, deadline, "NCCL");
      PollPause(since);
    }
  }

  // Waits until `event` has completed, watching for NCCL errors meanwhile.
  void AwaitEvent(const std::string& op, cudaEvent_t event, Clock::time_point deadline) {
    TORCH_CHECK(broken_.empty(), Where(op),
                ": communicator is unusable after an earlier error: ", broken_);
    const DeviceScope on_device(device_);
    CheckCuda(on_device.result(), op, "cudaSetDevice(" + std::to_string(device_) + ")");
    const Clock::time_point since = Clock::now();
    while (true) {
      cudaError_t query = cudaEventQuery(event);
      if (query == cudaSuccess) return;
      if (query != cudaErrorNotReady) CheckCuda(query, op, "cudaEventQuery");
      ncclResult_t state = ncclSuccess;
      CheckNccl(ncclCommGetAsyncError(comm_, &state), op, "ncclCommGetAsyncError");
      CheckNccl(state, op, "NCCL");
      CheckDeadline(op, deadline, "the GPU");
      PollPause(since);
    }
  }

  // Makes stream_ wait for the work queued so far on the calling thread's current CUDA
  // stream for device_ (LibTorch's "current stream": the trainer's compute stream, a side
  // stream it set, or the stream autograd runs a gradient hook on), through an event, so
  // the collective reads the tensors only once the kernels that wrote them have run.
  // The stream comes from c10's CUDA device guard, which a CUDA LibTorch registers; a CPU
  // LibTorch has none and no stream but the legacy default one, which stream_ (a blocking
  // stream) is ordered after already. The guard's events are cudaEvent_t.
  void OrderAfterCurrentStream(const std::string& op) {
    if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) return;
    const c10::impl::DeviceGuardImplInterface* guard =
        c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    const auto index = static_cast<c10::DeviceIndex>(device_);
    void* event = nullptr;
    try {
      const c10::Stream current = guard->getStream(c10::Device(c10::DeviceType::CUDA, index));
      guard->record(&event, current, index, c10::EventFlag::PYTORCH_DEFAULT);
    } catch (const std::exception& e) {
      if (event != nullptr) guard->destroyEvent(event, index);
      Fail(op, "recording an event on the current CUDA stream: " + sdk::ErrorMessage(e));
    }
    const cudaError_t waited = cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(event), 0);
    guard->destroyEvent(event, index);
    CheckCuda(waited, op, "cudaStreamWaitEvent (the collective's stream after the current stream)");
  }

  // Enqueues the collective on the stream and returns an event recorded after it, or
  // nullptr when there is nothing to do.
  cudaEvent_t Launch(const std::string& op, bool reduce, std::vector<torch::Tensor>& tensors,
                     const std::function<ncclResult_t(void*, size_t, ncclDataType_t)>& enqueue) {
    TORCH_CHECK(broken_.empty(), Where(op),
                ": communicator is unusable after an earlier error: ", broken_);
    std::vector<ncclDataType_t> types;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const torch::Tensor& tensor = tensors[i];
      TORCH_CHECK(tensor.defined(), Where(op), ": tensor ", i, " is undefined");
      TORCH_CHECK(tensor.is_cuda() && tensor.get_device() == device_, Where(op), ": tensor ", i,
                  " is on ", tensor.device(), ", expected cuda:", device_);
      TORCH_CHECK(tensor.is_contiguous() && tensor.layout() == torch::kStrided, Where(op),
                  ": tensor ", i, " must be dense and contiguous");
      std::optional<ncclDataType_t> type = ToNccl(tensor.scalar_type(), reduce);
      TORCH_CHECK(type.has_value(), Where(op), ": tensor ", i, " has dtype ",
                  tensor.scalar_type(),
                  reduce ? ", which NCCL does not reduce" : ", which NCCL does not carry");
      types.push_back(*type);
    }
    if (tensors.empty()) return nullptr;

    const Clock::time_point deadline = Clock::now() + timeout_;
    const DeviceScope on_device(device_);
    CheckCuda(on_device.result(), op, "cudaSetDevice(" + std::to_string(device_) + ")");
    OrderAfterCurrentStream(op);
    CheckNccl(ncclGroupStart(), op, "ncclGroupStart");
    ncclResult_t first_error = ncclSuccess;
    for (size_t i = 0; i < tensors.size(); ++i) {
      ncclResult_t result = enqueue(tensors[i].data_ptr(), tensors[i].numel(), types[i]);
      if (first_error == ncclSuccess && result != ncclInProgress) first_error = result;
    }
    ncclResult_t end = ncclGroupEnd();
    CheckNccl(first_error, op, "enqueueing " + std::to_string(tensors.size()) + " tensors");
    CheckNccl(end, op, "ncclGroupEnd");
    AwaitComm(op, deadline);
    cudaEvent_t event = nullptr;
    CheckCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), op, "cudaEventCreate");
    cudaError_t recorded = cudaEventRecord(event, stream_);
    if (recorded != cudaSuccess) {
      cudaEventDestroy(event);
      CheckCuda(recorded, op, "cudaEventRecord");
    }
    return event;
  }

  const int rank_;
  const int world_size_;
  const int device_;
  const std::chrono::milliseconds timeout_;
  const std::string name_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::string broken_;  // the first error, once there was one
};

}  // namespace

bool CudaDeviceAvailable() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear it: the runtime would report it again on the next call
    return false;
  }
  return count > 0;
}

std::unique_ptr<Communicator> MakeNcclCommunicator(c10::intrusive_ptr<c10d::Store> store,
                                                   int rank, int world_size, int device,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& name) {
  const std::string where = sdk::CheckCommunicatorArgs("nccl", name, rank, world_size, timeout);
  TORCH_CHECK(store, where, ": no store");
  TORCH_CHECK(device >= 0, where, ": bad cuda device ", device);
  auto comm = std::make_unique<NcclCommunicator>(rank, world_size, device, timeout, name);
  comm->Init(*store);
  return comm;
}

std::unique_ptr<Communicator> MakeNcclCommunicator(Client& client, const std::string& job,
                                                   int rank, int world_size, int device,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& name) {
  auto store = c10::make_intrusive<sdk::EmberStore>(client, job, timeout);
  return MakeNcclCommunicator(std::move(store), rank, world_size, device, timeout, name);
}

}  // namespace ember
