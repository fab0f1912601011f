// Data-parallel model synchronization: every rank holds a replica of one module;
// ModelSync keeps the replicas identical by broadcasting rank 0's state once and
// averaging gradients after every backward pass.
//
//   auto client = ember::Client::Connect().value();
//   ember::ModelSync sync(model, ember::MakeGlooCommunicator(*client, job, rank, world));
//   sync.BroadcastParameters();
//   for (...) {
//     optimizer.zero_grad();
//     loss.backward();
//     sync.AverageGradients();
//     optimizer.step();
//   }
//
// Every ModelSync call is a collective: all ranks must make the same calls in the same
// order. Errors throw c10::Error (see ember/communicator.h).
#ifndef EMBER_MODEL_SYNC_H_
#define EMBER_MODEL_SYNC_H_

#include <chrono>
#include <memory>
#include <string>

#include <torch/nn/module.h>

#include "ember/client.h"
#include "ember/communicator.h"

namespace ember {

// Gloo on CPU tensors, bootstrapped through emberd's Coordinator store: rendezvous keys
// are scoped by `job` and live under "ember/gloo/<name>/", so several communicators of
// one job need distinct names, and a name is for one run of a job. With `across_nodes`
// false every rank is on this node and Gloo listens on 127.0.0.1; with it true, on the
// interface named by $GLOO_SOCKET_IFNAME, else on the address this host's name resolves
// to (the store is then the coordinating daemon's, through $EMBER_COORDINATOR).
// `timeout` bounds the rendezvous and every collective. Blocks until all `world_size`
// ranks have joined; throws c10::Error if that fails or times out. Sets SIGPIPE to
// ignored if it has its default action, so that a dead peer fails a collective (naming
// it) rather than ending the process. `client` must outlive the communicator.
std::unique_ptr<Communicator> MakeGlooCommunicator(
    Client& client, const std::string& job, int rank, int world_size,
    std::chrono::milliseconds timeout = std::chrono::seconds(300),
    const std::string& name = "default", bool across_nodes = false);

// Shared memory on CPU tensors, for ranks that use the same emberd (one node): emberd
// hands every rank the same zero-filled memfd for (`job`, `name`) and the ranks reduce
// through it, on the calling thread, with futex barriers (sdk/sync/shm_communicator.h).
// No sockets and no helper threads, so it costs less than Gloo on one node, most of all
// when the ranks already keep every core busy; nothing is left behind by a crash (the
// memory lives only in the ranks' mappings). A peer that exits fails the others' next
// wait at once; `timeout` bounds the rendezvous and every collective. Each name is for
// one communicator of one run of a job. AllReduceSumAsync queues the all-reduce: it runs
// when it (or a later collective) is waited. Throws c10::Error if the daemon refuses
// the segment or the rendezvous fails. `client` is used only during the call.
std::unique_ptr<Communicator> MakeSharedMemoryCommunicator(
    Client& client, const std::string& job, int rank, int world_size,
    std::chrono::milliseconds timeout = std::chrono::seconds(300),
    const std::string& name = "default");

// Keeps a reference to `module` (which must outlive this object) and reads its
// parameters and buffers at every call, in the module's registration order. Broadcasts
// and checks send one flat buffer per dtype; AverageGradients sends gradients of 1 MiB
// or more in place and packs the smaller ones into one flat buffer per dtype.
// Not thread-safe; use it from the training loop.
class ModelSync {
 public:
  ModelSync(torch::nn::Module& module, std::shared_ptr<Communicator> comm);

  // Overwrites this rank's parameters and buffers with rank 0's. First checks that all
  // ranks have the same layout (count, dtypes and shapes of the tensors) and throws on
  // every rank if not.
  void BroadcastParameters();

  // Replaces the gradient of every parameter that requires grad by the mean over ranks
  // (sum / world_size). A rank without a gradient for a parameter contributes zeros;
  // a parameter that no rank has a gradient for keeps an undefined gradient. Dense
  // gradients only.
  void AverageGradients();

  // True if this rank's parameters and buffers are bitwise identical to rank 0's
  // (which it receives by broadcast). Each rank learns only its own answer. Needs the
  // same layout on every rank, which BroadcastParameters has checked.
  bool MatchesRoot();

  const Communicator& comm() const { return *comm_; }
  Communicator& comm() { return *comm_; }

 private:
  torch::nn::Module& module_;
  std::shared_ptr<Communicator> comm_;
};

}  // namespace ember

#endif  // EMBER_MODEL_SYNC_H_
