#include "sdk/sync/communicator_args.h"

#include <c10/util/Exception.h>

namespace ember::sdk {

std::string CheckCommunicatorArgs(const std::string& backend, const std::string& name, int rank,
                                  int world_size, std::chrono::milliseconds timeout,
                                  int max_world_size) {
  const std::string where = backend + " communicator '" + name + "' (rank " +
                            std::to_string(rank) + " of " + std::to_string(world_size) + ")";
  if (max_world_size == std::numeric_limits<int>::max()) {
    TORCH_CHECK(world_size >= 1, where, ": world size must be at least 1");
  } else {
    TORCH_CHECK(world_size >= 1 && world_size <= max_world_size, where,
                ": world size must be 1 to ", max_world_size);
  }
  TORCH_CHECK(rank >= 0 && rank < world_size, where, ": rank is outside the world");
  TORCH_CHECK(timeout.count() > 0, where, ": timeout must be positive, got ", timeout.count(),
              " ms");
  return where;
}

void CheckCpuTensors(const std::vector<at::Tensor>& tensors, const std::string& where,
                     bool bool_ok) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& tensor = tensors[i];
    TORCH_CHECK(tensor.defined(), where, ": tensor ", i, " is undefined");
    TORCH_CHECK(tensor.device().is_cpu() && tensor.layout() == c10::kStrided, where,
                ": tensor ", i, " must be a dense CPU tensor, got ", tensor.toString(), " on ",
                tensor.device());
    TORCH_CHECK(bool_ok || tensor.scalar_type() != c10::kBool, where, ": tensor ", i,
                " is bool, which has no sum");
  }
}

void FirstError::CheckUsable(const std::string& where) const {
  TORCH_CHECK(message_.empty(), where, ": communicator is unusable after an earlier error: ",
              message_);
}

}  // namespace ember::sdk
