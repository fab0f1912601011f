#include "ember/device_loader.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ember/ring_layout.h"

namespace ember {
namespace {

std::string Where(int device) {
  return "ember device loader (cuda:" + std::to_string(device) + ")";
}

std::string CudaMessage(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

void CheckCuda(cudaError_t error, int device, const char* call) {
  TORCH_CHECK(error == cudaSuccess, Where(device), ": ", call, ": ", CudaMessage(error));
}

// `device` if this process can use it; throws otherwise (before any CUDA state exists).
int CheckedDevice(int device) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it so that later checks do not see it
    TORCH_CHECK(false, Where(device),
                ": no usable CUDA device: cudaGetDeviceCount: ", CudaMessage(error));
  }
  TORCH_CHECK(device >= 0 && device < count, Where(device), ": no such device (this process sees ",
              count, " CUDA device", count == 1 ? "" : "s", ")");
  return device;
}

// Runs on a CUDA runtime thread once the slot's copy has finished: hands the slot back.
// (No CUDA calls here; the handle only stores the slot's state and may wake the daemon.)
void CUDART_CB ReleaseSlot(void* slot) { delete static_cast<std::shared_ptr<SlotHandle>*>(slot); }

}  // namespace

class DeviceLoader::Impl {
 public:
  Impl(std::unique_ptr<StreamReader> reader, const DeviceLoaderOptions& options)
      : device_(CheckedDevice(options.device)),
        reader_(std::move(reader)),
        // A non-blocking stream from LibTorch's pool: copies neither wait for nor hold
        // up the legacy default stream. Pool streams live as long as the process, which
        // the caching allocator needs of a stream it allocated on (tensors allocated
        // here outlive the loader; with expandable segments it synchronizes that stream).
        copy_stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false,
                                                  static_cast<c10::DeviceIndex>(device_))) {
    TORCH_CHECK(reader_ != nullptr, Where(device_), ": no stream");
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    if (options.register_ring) {
      const size_t size = reader_->ring_size();
      cudaError_t error =
          cudaHostRegister(const_cast<void*>(reader_->ring_base()), size, cudaHostRegisterDefault);
      if (error == cudaSuccess) {
        registered_ = true;
      } else {
        cudaGetLastError();  // not sticky: clear it
        registration_status_ =
            ResourceExhausted("cudaHostRegister of the ring (" + std::to_string(size) +
                              " bytes): " + CudaMessage(error));
        TORCH_WARN(Where(device_), ": ", registration_status_.message(),
                   "; copying batches through pinned staging buffers instead");
      }
    } else {
      registration_status_ =
          FailedPrecondition("ring registration is off (DeviceLoaderOptions::register_ring)");
    }
    // With the ring registered, batch s must not be taken before the slot of batch
    // s - slot_count is back, so there is one lane per slot; staged copies alternate
    // between two staging buffers.
    lanes_.resize(registered_ ? std::max<uint32_t>(1, reader_->info().slot_count) : 2);
    for (Lane& lane : lanes_) {
      cudaError_t error = cudaEventCreateWithFlags(&lane.done, cudaEventDisableTiming);
      if (error != cudaSuccess) {
        Release();
        CheckCuda(error, device_, "cudaEventCreateWithFlags");
      }
    }
  }

  ~Impl() { Release(); }

  std::optional<Batch> Next() {
    if (!pending_) pending_ = Issue();
    Prefetched current = std::move(*pending_);
    pending_.reset();
    TORCH_CHECK(current.status.ok(), "ember: reading the next batch: ", current.status.ToString());
    if (!current.batch) return std::nullopt;
    HandOver(current);
    // The copy of the batch after it goes on the copy stream now, so it overlaps the
    // step the trainer is about to run on this one.
    pending_ = Issue();
    return std::move(current.batch);
  }

  int device() const { return device_; }
  StreamReader& reader() const { return *reader_; }
  bool registered() const { return registered_; }
  const Status& registration_status() const { return registration_status_; }
  uint64_t copies_issued() const { return copies_issued_; }

 private:
  // One in-flight position: its event is recorded after the copies of the latest batch
  // that used it (and, with the ring registered, after that batch's slot was handed back).
  struct Lane {
    cudaEvent_t done = nullptr;
    bool used = false;
    void* staging = nullptr;  // pinned, only when the ring is not registered
    size_t staging_bytes = 0;
  };

  // A batch whose copy has been queued, or the end of an epoch/the stream, or an error.
  struct Prefetched {
    Status status;
    std::optional<Batch> batch;    // tensors on the device, being written by the copy stream
    cudaEvent_t copied = nullptr;  // recorded after the batch's copies
  };

  // Best effort, never throws: the copies (and the slot releases queued after them) must
  // be done before the ring is unregistered, and unmapped with the reader.
  void Release() {
    int previous = -1;
    cudaGetDevice(&previous);
    cudaSetDevice(device_);
    cudaStreamSynchronize(copy_stream_.stream());
    pending_.reset();
    if (registered_) cudaHostUnregister(const_cast<void*>(reader_->ring_base()));
    registered_ = false;
    for (Lane& lane : lanes_) {
      if (lane.done != nullptr) cudaEventDestroy(lane.done);
      if (lane.staging != nullptr) cudaFreeHost(lane.staging);
    }
    lanes_.clear();
    if (previous >= 0) cudaSetDevice(previous);
    cudaGetLastError();
  }

  // Takes the next batch from the ring and queues its copy to the device.
  Prefetched Issue() {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    Lane& lane = lanes_[copies_issued_ % lanes_.size()];
    if (lane.used)
      CheckCuda(cudaEventSynchronize(lane.done), device_, "waiting for an earlier copy");

    Prefetched out;
    auto next = reader_->Next();
    if (!next.ok()) {
      out.status = next.status();
      return out;
    }
    if (!next->has_value()) return out;
    RawBatch raw = std::move(**next);
    std::shared_ptr<SlotHandle> slot = raw.slot;
    Batch host = ToTorch(std::move(raw));  // CPU views of the slot: names, dtypes, shapes

    try {
      CopyToDevice(lane, host, slot, out);
    } catch (...) {
      // Copies of this batch may still read the slot: finish them before `slot` and the
      // views hand it back.
      cudaStreamSynchronize(copy_stream_.stream());
      throw;
    }
    // After the host function that hands a registered slot back, not just after the
    // copies: reusing this lane waits on the event, and by then the slot must be back, or
    // the reader, seeing every slot held, refuses the next batch (tried on an H200: the
    // trainer's step did not get faster, and h2d_bench's loader rows failed so).
    CheckCuda(cudaEventRecord(lane.done, copy_stream_.stream()), device_, "cudaEventRecord");
    lane.used = true;
    out.copied = lane.done;
    ++copies_issued_;
    return out;
  }

  // Queues the copies of `host` (views of the ring slot `slot` holds) into new device tensors
  // in `out`, then hands the slot back: at once if the bytes went through the lane's
  // staging buffer, else from the copy stream once the copies are done.
  void CopyToDevice(Lane& lane, Batch& host, std::shared_ptr<SlotHandle>& slot, Prefetched& out) {
    std::vector<const void*> sources;
    if (registered_) {
      for (const torch::Tensor& t : host.tensors) sources.push_back(t.data_ptr());
    } else {
      Stage(lane, host, sources);
    }

    Batch& batch = out.batch.emplace();
    batch.epoch = host.epoch;
    batch.index_in_epoch = host.index_in_epoch;
    batch.names = host.names;
    {
      // Allocated on the copy stream, which writes them first; HandOver records their use
      // on the trainer's stream so that the allocator does not give their memory back to
      // the copy stream while the trainer may still use it.
      c10::cuda::CUDAStreamGuard stream_guard(copy_stream_);
      for (size_t i = 0; i < sources.size(); ++i) {
        const torch::Tensor& view = host.tensors[i];
        torch::Tensor on_device =
            torch::empty(view.sizes(), view.options().device(torch::kCUDA, device_));
        CheckCuda(cudaMemcpyAsync(on_device.data_ptr(), sources[i], view.nbytes(),
                                  cudaMemcpyHostToDevice, copy_stream_.stream()),
                  device_, "cudaMemcpyAsync (host to device)");
        batch.tensors.push_back(std::move(on_device));
      }
    }
    host.tensors.clear();  // the views; `slot` still holds the ring slot
    if (!registered_) {
      slot.reset();  // its bytes are in the staging buffer: hand it back
    } else {
      // Queued after the copies, so the slot is handed back once the DMA has read it.
      auto* holder = new std::shared_ptr<SlotHandle>(std::move(slot));
      cudaError_t error = cudaLaunchHostFunc(copy_stream_.stream(), &ReleaseSlot, holder);
      if (error != cudaSuccess) {
        cudaStreamSynchronize(copy_stream_.stream());
        delete holder;
        CheckCuda(error, device_, "cudaLaunchHostFunc");
      }
    }
  }

  // Copies the batch's tensors into the lane's staging buffer (growing it) and points
  // `sources` there. The lane's previous copy is done (Issue waited for it).
  void Stage(Lane& lane, const Batch& host, std::vector<const void*>& sources) {
    size_t total = 0;
    for (const torch::Tensor& t : host.tensors)
      total += ring::AlignUp(t.nbytes(), ring::kCacheLine);
    if (total > lane.staging_bytes) {
      if (lane.staging != nullptr) CheckCuda(cudaFreeHost(lane.staging), device_, "cudaFreeHost");
      lane.staging = nullptr;
      lane.staging_bytes = 0;
      CheckCuda(cudaHostAlloc(&lane.staging, total, cudaHostAllocDefault), device_,
                "cudaHostAlloc of a staging buffer");
      lane.staging_bytes = total;
    }
    auto* at = static_cast<uint8_t*>(lane.staging);
    for (const torch::Tensor& t : host.tensors) {
      std::memcpy(at, t.data_ptr(), t.nbytes());
      sources.push_back(at);
      at += ring::AlignUp(t.nbytes(), ring::kCacheLine);
    }
  }

  // Orders the trainer's current stream after the batch's copy and tells the caching
  // allocator that the tensors are used there.
  void HandOver(const Prefetched& prefetched) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    c10::cuda::CUDAStream compute =
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_));
    // The wait uses the event as recorded now; re-recording it later does not change it.
    CheckCuda(cudaStreamWaitEvent(compute.stream(), prefetched.copied, 0), device_,
              "cudaStreamWaitEvent");
    for (const torch::Tensor& t : prefetched.batch->tensors) t.record_stream(compute);
  }

  const int device_;
  std::unique_ptr<StreamReader> reader_;
  const c10::cuda::CUDAStream copy_stream_;
  bool registered_ = false;
  Status registration_status_;
  std::vector<Lane> lanes_;
  std::optional<Prefetched> pending_;  // the batch after the one Next() returned last
  uint64_t copies_issued_ = 0;
};

DeviceLoader::DeviceLoader(Client& client, const StreamOptions& options,
                           const DeviceLoaderOptions& device_options) {
  CheckedDevice(device_options.device);  // before opening a stream for nothing
  auto reader = client.OpenStream(options);
  TORCH_CHECK(reader.ok(), "ember: opening stream of dataset '", options.dataset, "' for job '",
              options.job, "' rank ", options.rank, ": ", reader.status().ToString());
  impl_ = std::make_unique<Impl>(std::move(reader).value(), device_options);
}

DeviceLoader::DeviceLoader(std::unique_ptr<StreamReader> reader,
                           const DeviceLoaderOptions& device_options)
    : impl_(std::make_unique<Impl>(std::move(reader), device_options)) {}

DeviceLoader::~DeviceLoader() = default;

std::optional<Batch> DeviceLoader::Next() { return impl_->Next(); }
bool DeviceLoader::ended() const { return impl_->reader().ended(); }
uint64_t DeviceLoader::batches_per_epoch() const {
  return impl_->reader().info().batches_per_epoch;
}
const StreamReader& DeviceLoader::reader() const { return impl_->reader(); }
int DeviceLoader::device() const { return impl_->device(); }
bool DeviceLoader::ring_registered() const { return impl_->registered(); }
const Status& DeviceLoader::registration_status() const { return impl_->registration_status(); }
uint64_t DeviceLoader::copies_issued() const { return impl_->copies_issued(); }

}  // namespace ember
