// NCCL-backed Communicator on CUDA tensors, one GPU per process.
//
// Uses only the CUDA runtime and nccl.h (no ATen CUDA), so it builds against a CPU
// LibTorch too; it is useful with a CUDA build of LibTorch, whose CUDA tensors it
// reduces in place through their data_ptr().
#ifndef EMBER_NCCL_COMMUNICATOR_H_
#define EMBER_NCCL_COMMUNICATOR_H_

#include <chrono>
#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ember/client.h"
#include "ember/communicator.h"

namespace ember {

// True if the CUDA runtime sees at least one GPU. Never throws.
bool CudaDeviceAvailable();

// Joins `world_size` ranks through `store`: rank 0 makes the NCCL unique id and sets
// it under "ember/nccl/<name>/unique_id"; the others wait for it. `device` is this
// process's GPU (it becomes the thread's current CUDA device).
//
// Collectives take contiguous CUDA tensors on `device` and run on the communicator's own
// stream. A collective starts only after the work already queued on the calling thread's
// current CUDA stream (LibTorch's, e.g. set by c10::cuda::CUDAStreamGuard; the default
// stream otherwise), ordered by a CUDA event, so tensors that kernels are still writing
// are read once they are written; the caller's stream does not wait for the collective.
// Each call (AllReduceSum, Broadcast, PendingCollective::Wait) returns once its work is
// finished on this GPU, so whatever the caller queues afterwards sees the result. The
// communicator is non-blocking underneath and polled, so initialization or a collective
// that a dead or stuck peer keeps from finishing aborts the communicator and throws
// c10::Error after `timeout` instead of hanging. CUDA and NCCL errors throw c10::Error
// with the library's message, naming the operation and rank.
std::unique_ptr<Communicator> MakeNcclCommunicator(
    c10::intrusive_ptr<c10d::Store> store, int rank, int world_size, int device,
    std::chrono::milliseconds timeout = std::chrono::seconds(300),
    const std::string& name = "default");

// The same, bootstrapped through emberd's Coordinator store, scoped by `job`.
// `client` must outlive the call.
std::unique_ptr<Communicator> MakeNcclCommunicator(
    Client& client, const std::string& job, int rank, int world_size, int device,
    std::chrono::milliseconds timeout = std::chrono::seconds(300),
    const std::string& name = "default");

}  // namespace ember

#endif  // EMBER_NCCL_COMMUNICATOR_H_
