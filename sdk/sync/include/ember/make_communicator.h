// One call that picks the gradient-sync backend from where the tensors live:
//
//   ember::examples::FashionCnn net;
//   net->to(device);                                   // kCPU or cuda:<local rank>
//   ember::DataParallel ddp(*net, ember::MakeCommunicator(*client, job, rank, world,
//                                                         ember::ModuleDevice(*net)));
//
// CUDA tensors go over NCCL on that GPU (ember/nccl_communicator.h); CPU tensors through
// shared memory from emberd (ranks on one node; ember/model_sync.h), across nodes through
// shared memory within each node and Gloo between one leader per node, or over Gloo
// between all ranks when asked. Every backend is rendezvoused through emberd, under `job`, and fails within
// `timeout` instead of hanging when a peer dies or the world does not match.
#ifndef EMBER_MAKE_COMMUNICATOR_H_
#define EMBER_MAKE_COMMUNICATOR_H_

#include <torch/nn/module.h>

#include <chrono>
#include <memory>
#include <string>

#include "ember/client.h"
#include "ember/communicator.h"

namespace ember {

enum class CpuCollectives {
  kSharedMemory,  // through a memfd from emberd within each node (the default)
  kGloo,          // over TCP with Gloo between all ranks
};

struct CommunicatorOptions {
  std::chrono::milliseconds timeout = std::chrono::seconds(300);  // rendezvous and each collective
  std::string name = "default";  // distinct per communicator of one run of a job
  CpuCollectives cpu = CpuCollectives::kSharedMemory;
  // Ranks of the job on this node (LaunchEnv::local_world_size); 0 or world_size: all of
  // them. Fewer: the job spans nodes. With kSharedMemory, CPU collectives are then
  // hierarchical: shared memory among the ranks of each node and Gloo between the nodes'
  // leaders (their lowest ranks); with one rank on every node, Gloo between all ranks.
  // The ranks find their nodes at the rendezvous (ranks with the same host name and emberd
  // socket path share one), so any assignment of ranks to nodes works, uneven ones too;
  // a rank whose local_world_size differs from the ranks found on its node fails them all.
  // AllReduceSumAsync then completes before it returns, and a collective fails within about twice
  // `timeout` of a peer stopping (sdk/sync/hierarchical_communicator.h).
  int local_world_size = 0;
};

// The communicator for tensors on `device`: NCCL on GPU device.index() (0 if unset) for
// CUDA, else the CPU backend of options.cpu. Blocks until all `world_size` ranks have
// joined. Throws c10::Error from the backend (naming it, the rank and the cause), or for
// a device type no backend serves. `client` must outlive a Gloo communicator.
std::unique_ptr<Communicator> MakeCommunicator(Client& client, const std::string& job, int rank,
                                               int world_size, const torch::Device& device,
                                               const CommunicatorOptions& options = {});

// The device that all of `module`'s parameters and buffers are on. Throws c10::Error
// naming two tensors on different devices, or if the module has none.
torch::Device ModuleDevice(const torch::nn::Module& module);

}  // namespace ember

#endif  // EMBER_MAKE_COMMUNICATOR_H_
