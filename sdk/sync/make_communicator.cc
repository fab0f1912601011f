#include "ember/make_communicator.h"

#include <optional>
#include <utility>

#include "ember/model_sync.h"
#include "ember/nccl_communicator.h"
#include "sdk/sync/hierarchical_communicator.h"

namespace ember {

std::unique_ptr<Communicator> MakeCommunicator(Client& client, const std::string& job, int rank,
                                               int world_size, const torch::Device& device,
                                               const CommunicatorOptions& options) {
  if (device.is_cuda()) {
    return MakeNcclCommunicator(client, job, rank, world_size,
                                device.has_index() ? device.index() : 0, options.timeout,
                                options.name);
  }
  TORCH_CHECK(device.is_cpu(), "no gradient-sync backend for tensors on ", device, " (job '", job,
              "', rank ", rank, " of ", world_size,
              "): NCCL serves cuda, shared memory and Gloo serve cpu");
  const bool across_nodes =
      options.local_world_size > 0 && options.local_world_size < world_size;
  if (options.cpu == CpuCollectives::kGloo) {
    return MakeGlooCommunicator(client, job, rank, world_size, options.timeout, options.name,
                                across_nodes);
  }
  if (across_nodes) {
    return sdk::MakeHierarchicalCommunicator(client, job, rank, world_size, options.timeout,
                                             options.name, sdk::NodeKey(client),
                                             options.local_world_size);
  }
  return MakeSharedMemoryCommunicator(client, job, rank, world_size, options.timeout, options.name);
}

torch::Device ModuleDevice(const torch::nn::Module& module) {
  std::optional<std::pair<std::string, torch::Device>> first;
  auto visit = [&](const std::string& name, const torch::Tensor& tensor) {
    if (!tensor.defined()) return;
    if (!first) {
      first.emplace(name, tensor.device());
      return;
    }
    TORCH_CHECK(tensor.device() == first->second,
                "the module's tensors are on more than one device: '", first->first, "' on ",
                first->second, ", '", name, "' on ", tensor.device());
  };
  for (const auto& item : module.named_parameters()) visit(item.key(), item.value());
  for (const auto& item : module.named_buffers()) visit(item.key(), item.value());
  TORCH_CHECK(first.has_value(), "the module has no parameters or buffers: no device to sync on");
  return first->second;
}

}  // namespace ember
