#include "ember/model_sync.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "sdk/sync/ember_store.h"
#include "sdk/sync/gloo_communicator.h"

namespace ember {
namespace {

// Tensors of one dtype, in registration order.
struct Group {
  torch::ScalarType dtype;
  std::vector<torch::Tensor> tensors;
  int64_t numel = 0;
};

std::vector<Group> GroupByDtype(const std::vector<torch::Tensor>& tensors) {
  std::map<int, Group> groups;  // ordered by dtype, the same on every rank
  for (const torch::Tensor& tensor : tensors) {
    auto [it, inserted] = groups.try_emplace(static_cast<int>(tensor.scalar_type()));
    Group& group = it->second;
    group.dtype = tensor.scalar_type();
    group.tensors.push_back(tensor);
    group.numel += tensor.numel();
  }
  std::vector<Group> result;
  for (auto& entry : groups) result.push_back(std::move(entry.second));
  return result;
}

torch::Tensor Flatten(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> flat;
  flat.reserve(tensors.size());
  for (const torch::Tensor& tensor : tensors) flat.push_back(tensor.reshape({-1}));
  return torch::cat(flat);
}

void Unflatten(const torch::Tensor& flat, std::vector<torch::Tensor>& tensors) {
  int64_t offset = 0;
  for (torch::Tensor& tensor : tensors) {
    tensor.copy_(flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
    offset += tensor.numel();
  }
}

std::vector<torch::Tensor> ParametersAndBuffers(torch::nn::Module& module) {
  std::vector<torch::Tensor> tensors = module.parameters();
  for (torch::Tensor& buffer : module.buffers()) tensors.push_back(buffer);
  return tensors;
}

// FNV-1a over the dtype and shape of every tensor, as an int64 for the wire.
int64_t LayoutHash(const std::vector<torch::Tensor>& tensors) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](int64_t value) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= static_cast<uint64_t>(value >> (8 * byte)) & 0xff;
      hash *= 1099511628211ull;
    }
  };
  for (const torch::Tensor& tensor : tensors) {
    mix(static_cast<int64_t>(tensor.scalar_type()));
    mix(tensor.dim());
    for (int64_t size : tensor.sizes()) mix(size);
  }
  int64_t result;
  std::memcpy(&result, &hash, sizeof(result));
  return result;
}

bool BitwiseEqual(const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor ca = a.to(torch::kCPU).contiguous();
  torch::Tensor cb = b.to(torch::kCPU).contiguous();
  return ca.nbytes() == cb.nbytes() && std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

}  // namespace

std::unique_ptr<Communicator> MakeGlooCommunicator(Client& client, const std::string& job,
                                                   int rank, int world_size,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& name) {
  auto store = c10::make_intrusive<sdk::EmberStore>(client, job, timeout);
  return sdk::MakeGlooCommunicator(std::move(store), rank, world_size, timeout, name);
}

ModelSync::ModelSync(torch::nn::Module& module, std::shared_ptr<Communicator> comm)
    : module_(module), comm_(std::move(comm)) {
  TORCH_CHECK(comm_ != nullptr, "ModelSync: no communicator");
}

void ModelSync::BroadcastParameters() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tensors = ParametersAndBuffers(module_);
  int64_t numel = 0;
  for (const torch::Tensor& tensor : tensors) numel += tensor.numel();
  const std::vector<int64_t> local = {static_cast<int64_t>(tensors.size()), numel,
                                      LayoutHash(tensors)};

  std::vector<torch::Tensor> layout = {torch::tensor(local, torch::kInt64)};
  comm_->Broadcast(layout, 0);
  const int64_t* root = layout[0].data_ptr<int64_t>();
  const bool same = root[0] == local[0] && root[1] == local[1] && root[2] == local[2];
  std::vector<torch::Tensor> mismatches = {torch::tensor({same ? int64_t{0} : int64_t{1}})};
  comm_->AllReduceSum(mismatches);
  const int64_t ranks_differing = mismatches[0].item<int64_t>();
  TORCH_CHECK(ranks_differing == 0, "ModelSync::BroadcastParameters (rank ", comm_->rank(),
              "): the module differs from rank 0's on ", ranks_differing,
              " rank(s); this rank has ", local[0], " tensors with ", local[1],
              " elements, rank 0 has ", root[0], " with ", root[1],
              same ? "" : (root[2] != local[2] ? " (dtypes or shapes differ)" : ""));
  if (tensors.empty()) return;

  std::vector<Group> groups = GroupByDtype(tensors);
  std::vector<torch::Tensor> flats;
  for (const Group& group : groups) flats.push_back(Flatten(group.tensors));
  comm_->Broadcast(flats, 0);
  for (size_t i = 0; i < groups.size(); ++i) Unflatten(flats[i], groups[i].tensors);
}

void ModelSync::AverageGradients() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parameters;
  for (const torch::Tensor& parameter : module_.parameters()) {
    if (parameter.requires_grad()) parameters.push_back(parameter);
  }
  if (parameters.empty()) return;

  // Each buffer: the group's gradients (zeros where undefined), then one entry per
  // parameter counting the ranks that had a gradient for it.
  std::vector<Group> groups = GroupByDtype(parameters);
  std::vector<torch::Tensor> buffers;
  for (const Group& group : groups) {
    std::vector<torch::Tensor> pieces;
    std::vector<double> has_grad;
    for (const torch::Tensor& parameter : group.tensors) {
      const torch::Tensor& grad = parameter.grad();
      if (grad.defined()) {
        TORCH_CHECK(grad.layout() == torch::kStrided,
                    "ModelSync::AverageGradients: sparse gradients are not supported");
        pieces.push_back(grad.reshape({-1}));
      } else {
        pieces.push_back(torch::zeros({parameter.numel()}, parameter.options()));
      }
      has_grad.push_back(grad.defined() ? 1.0 : 0.0);
    }
    pieces.push_back(torch::tensor(has_grad, torch::kFloat64).to(group.tensors.front().options()));
    buffers.push_back(torch::cat(pieces));
  }
  comm_->AllReduceSum(buffers);

  const double world_size = comm_->world_size();
  for (size_t g = 0; g < groups.size(); ++g) {
    Group& group = groups[g];
    const int64_t count = static_cast<int64_t>(group.tensors.size());
    torch::Tensor counts =
        buffers[g].narrow(0, group.numel, count).to(torch::kCPU, torch::kFloat64).contiguous();
    const double* ranks_with_grad = counts.data_ptr<double>();
    torch::Tensor mean = buffers[g].narrow(0, 0, group.numel).div_(world_size);
    int64_t offset = 0;
    for (size_t i = 0; i < group.tensors.size(); ++i) {
      torch::Tensor& parameter = group.tensors[i];
      const int64_t numel = parameter.numel();
      if (ranks_with_grad[i] > 0) {
        torch::Tensor averaged = mean.narrow(0, offset, numel).view(parameter.sizes());
        if (parameter.grad().defined()) {
          parameter.mutable_grad().copy_(averaged);
        } else {
          parameter.mutable_grad() = averaged.clone();
        }
      }
      offset += numel;
    }
  }
}

bool ModelSync::MatchesRoot() {
  torch::NoGradGuard no_grad;
  std::vector<Group> groups = GroupByDtype(ParametersAndBuffers(module_));
  std::vector<torch::Tensor> local, root;
  for (const Group& group : groups) {
    local.push_back(Flatten(group.tensors));
    root.push_back(local.back().clone());
  }
  comm_->Broadcast(root, 0);
  for (size_t i = 0; i < local.size(); ++i) {
    if (!BitwiseEqual(local[i], root[i])) return false;
  }
  return true;
}

}  // namespace ember
