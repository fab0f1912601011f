#include "ember/model_sync.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/fnv1a.h"
#include "sdk/sync/ember_store.h"
#include "sdk/sync/error_message.h"
#include "sdk/sync/gloo_communicator.h"
#include "sdk/sync/same_world.h"
#include "sdk/sync/shm_communicator.h"

namespace ember {
namespace {

// AverageGradients all-reduces gradients of at least this size in place, each as its own
// tensor, and packs smaller ones into one flat buffer per dtype. Packing them all would
// allocate a buffer of the model's size every step (above glibc's mmap threshold, so it
// is mapped and page-faulted anew each time: for ResNet-18's 45 MB about as slow as the
// all-reduce itself) and make two more passes over it; sending every small one alone
// would pay a collective's latency for each.
constexpr int64_t kInPlaceGradientBytes = int64_t{1} << 20;

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
  uint64_t hash = kFnv1a64Offset;
  auto mix = [&hash](int64_t value) { hash = Fnv1a64Le(value, hash); };
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
                                                   const std::string& name, bool across_nodes) {
  auto store = c10::make_intrusive<sdk::EmberStore>(client, job, timeout);
  return sdk::MakeGlooCommunicator(std::move(store), rank, world_size, timeout, name,
                                   across_nodes);
}

std::unique_ptr<Communicator> MakeSharedMemoryCommunicator(Client& client, const std::string& job,
                                                           int rank, int world_size,
                                                           std::chrono::milliseconds timeout,
                                                           const std::string& name) {
  const uint64_t bytes = sdk::ShmSegmentBytes(world_size);
  const std::string where = "shared-memory communicator '" + name + "' (rank " +
                            std::to_string(rank) + " of " + std::to_string(world_size) + ")";
  TORCH_CHECK(rank >= 0 && rank < world_size, where, ": rank is outside the world");
  try {
    // Before the segment: a rank with another world size would be refused it, but the
    // ranks that got it would wait out the timeout for that rank.
    auto store = c10::make_intrusive<sdk::EmberStore>(client, job, timeout);
    sdk::CheckSameWorld(*store, "ember/shm/" + name, rank, world_size, timeout);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, where, ": rendezvous failed: ", sdk::ErrorMessage(e));
  }
  Result<int> fd = client.OpenSharedMemory(job, "ember/shm/" + name, static_cast<uint32_t>(rank),
                                           static_cast<uint32_t>(world_size), bytes);
  TORCH_CHECK(fd.ok(), where, ": emberd gave no segment: ", fd.status().ToString());
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{*fd};
  return sdk::MakeShmCommunicator(*fd, rank, world_size, timeout, name);
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

  // On the module's device: that is where this communicator works (NCCL: CUDA only).
  const torch::Device device =
      tensors.empty() ? torch::Device(torch::kCPU) : tensors.front().device();
  std::vector<torch::Tensor> layout = {torch::tensor(local, torch::kInt64).to(device)};
  comm_->Broadcast(layout, 0);
  const torch::Tensor root_layout = layout[0].to(torch::kCPU);
  const int64_t* root = root_layout.data_ptr<int64_t>();
  const bool same = root[0] == local[0] && root[1] == local[1] && root[2] == local[2];
  std::vector<torch::Tensor> mismatches = {
      torch::tensor({same ? int64_t{0} : int64_t{1}}).to(device)};
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

  // One collective call sums, in registration order: a vector counting the ranks that
  // have a gradient for each parameter, the small gradients packed into one flat buffer
  // per dtype, and the large ones in place. A rank without a gradient contributes zeros.
  std::vector<double> has_grad;
  std::vector<torch::Tensor> small, large;
  for (torch::Tensor& parameter : parameters) {
    if (parameter.grad().defined()) {
      TORCH_CHECK(parameter.grad().layout() == torch::kStrided,
                  "ModelSync::AverageGradients: sparse gradients are not supported");
      has_grad.push_back(1);
    } else {
      parameter.mutable_grad() = torch::zeros_like(parameter);
      has_grad.push_back(0);
    }
    const torch::Tensor& grad = parameter.grad();
    const bool in_place = static_cast<int64_t>(grad.nbytes()) >= kInPlaceGradientBytes;
    (in_place ? large : small).push_back(grad);
  }
  std::vector<Group> groups = GroupByDtype(small);
  std::vector<torch::Tensor> tensors = {
      torch::tensor(has_grad, torch::kFloat64).to(parameters.front().device())};
  for (const Group& group : groups) tensors.push_back(Flatten(group.tensors));
  tensors.insert(tensors.end(), large.begin(), large.end());
  comm_->AllReduceSum(tensors);

  const double world_size = comm_->world_size();
  for (size_t t = 1; t < tensors.size(); ++t) tensors[t].div_(world_size);
  for (size_t g = 0; g < groups.size(); ++g) Unflatten(tensors[1 + g], groups[g].tensors);
  const torch::Tensor counts = tensors[0].to(torch::kCPU).contiguous();
  const double* ranks_with_grad = counts.data_ptr<double>();
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (ranks_with_grad[i] == 0) parameters[i].mutable_grad() = torch::Tensor();  // none had one
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
