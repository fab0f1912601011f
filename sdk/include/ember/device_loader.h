// ember::DeviceLoader: batches of a stream as CUDA tensors, copied out of the shared ring
// on a side stream while the trainer computes.
//
//   auto client = ember::Client::Connect().value();
//   ember::DeviceLoader loader(*client, {.job = "run1", .dataset = "fmnist-train",
//                                        .batch_size = 64, .rank = r, .world_size = w},
//                              {.device = local_rank});
//   while (auto batch = loader.Next()) {
//     torch::Tensor x = batch->at("image");  // on cuda:<device>
//     ...
//   }
//
// The ring's mapping is registered with cudaHostRegister once, so each batch goes to the
// GPU by DMA straight from its ring slot (cudaMemcpyAsync on a non-blocking side stream of
// LibTorch's stream pool). Next() queues the copy of the following batch before it
// returns, so that copy overlaps the trainer's step on the returned batch. A slot goes
// back to the daemon as soon as its copy has finished; the device tensors hold no ring
// memory. If the registration fails, each batch is first copied into a pinned staging
// buffer (one more host memcpy; the copy to the GPU is still asynchronous) and
// ring_registered() / registration_status() say so; a warning is printed once
// (TORCH_WARN).
//
// Stream contract: the tensors Next() returns are ready on the stream that was current
// for `device` when Next() was called (c10::cuda::getCurrentCUDAStream): that stream
// waits for their copy, and the caching allocator knows they are used there
// (record_stream). To use them on another stream, order it after that one.
//
// Needs a CUDA build of LibTorch (build with --config=cuda; see .bazelrc). Errors throw
// c10::Error naming the device and the cause. For one thread, like ember::Loader.
#ifndef EMBER_DEVICE_LOADER_H_
#define EMBER_DEVICE_LOADER_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "ember/client.h"
#include "ember/loader.h"
#include "ember/status.h"
#include "ember/stream_reader.h"

namespace ember {

struct DeviceLoaderOptions {
  int device = 0;             // the CUDA device batches go to (usually the local rank's)
  bool register_ring = true;  // false: always copy through pinned staging buffers
};

class DeviceLoader {
 public:
  // Opens the stream, like ember::Loader; throws with the daemon's message on failure,
  // or if `device` is not a CUDA device this process can use.
  DeviceLoader(Client& client, const StreamOptions& options,
               const DeviceLoaderOptions& device_options = {});

  // Over a stream that is already open (e.g. from Client::OpenStream).
  explicit DeviceLoader(std::unique_ptr<StreamReader> reader,
                        const DeviceLoaderOptions& device_options = {});

  // Waits for the copies in flight, then unregisters the ring. Tensors already returned
  // stay valid.
  ~DeviceLoader();

  DeviceLoader(const DeviceLoader&) = delete;
  DeviceLoader& operator=(const DeviceLoader&) = delete;

  // The next batch of the current epoch with its tensors on the device, or nullopt at
  // the end of each epoch (the next call starts the following one) and once the stream
  // has ended. Blocks while the daemon has not produced the batch after it yet (that one
  // is prefetched). Errors of the stream (ember::Loader's) and CUDA errors throw.
  std::optional<Batch> Next();

  bool ended() const;
  uint64_t batches_per_epoch() const;
  const StreamReader& reader() const;
  int device() const;

  // True if copies come straight from the registered ring; otherwise
  // registration_status() says why not.
  bool ring_registered() const;
  const Status& registration_status() const;

  // Batches whose host-to-device copy has been queued so far (the one Next() returned
  // last plus, usually, the one after it).
  uint64_t copies_issued() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember

#endif  // EMBER_DEVICE_LOADER_H_
