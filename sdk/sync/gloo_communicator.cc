#include "sdk/sync/gloo_communicator.h"

#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace ember::sdk {
namespace {

constexpr const char* kLoopback = "127.0.0.1";

// The message of any exception, without c10's backtrace.
std::string Describe(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::ProcessGroupGloo> group, std::string name)
      : group_(std::move(group)), name_(std::move(name)) {}

  int rank() const override { return group_->getRank(); }
  int world_size() const override { return group_->getSize(); }

  void AllReduceSum(std::vector<torch::Tensor>& tensors) override {
    ForEach(tensors, "all-reduce", [this](std::vector<at::Tensor>& one) {
      return group_->allreduce(one, c10d::AllreduceOptions());
    });
  }

  void Broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    TORCH_CHECK(root >= 0 && root < world_size(), Where("broadcast"), ": root ", root,
                " is not a rank of this world");
    c10d::BroadcastOptions options;
    options.rootRank = root;
    options.rootTensor = 0;
    ForEach(tensors, "broadcast", [this, &options](std::vector<at::Tensor>& one) {
      return group_->broadcast(one, options);
    });
  }

 private:
  std::string Where(const char* op) const {
    return "gloo " + std::string(op) + " (group '" + name_ + "', rank " +
           std::to_string(rank()) + " of " + std::to_string(world_size()) + ")";
  }

  // Runs `collective` on each tensor in turn (a contiguous copy for strided ones,
  // copied back after). Any failure breaks the communicator for good: the ranks no
  // longer agree on which collective comes next.
  void ForEach(std::vector<torch::Tensor>& tensors, const char* op,
               const std::function<c10::intrusive_ptr<c10d::Work>(std::vector<at::Tensor>&)>&
                   collective) {
    TORCH_CHECK(broken_.empty(), Where(op), ": communicator is unusable after an earlier error: ",
                broken_);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < tensors.size(); ++i) {
      torch::Tensor& tensor = tensors[i];
      TORCH_CHECK(tensor.defined(), Where(op), ": tensor ", i, " is undefined");
      TORCH_CHECK(tensor.device().is_cpu() && tensor.layout() == torch::kStrided, Where(op),
                  ": tensor ", i, " must be a dense CPU tensor, got ", tensor.toString(),
                  " on ", tensor.device());
      std::vector<at::Tensor> one{tensor.is_contiguous() ? tensor : tensor.contiguous()};
      try {
        collective(one)->wait();
      } catch (const std::exception& e) {
        broken_ = Describe(e);
        TORCH_CHECK(false, Where(op), " of tensor ", i, " of ", tensors.size(), " (",
                    tensor.numel(), " x ", tensor.scalar_type(), ") failed: ", broken_);
      }
      if (!one[0].is_same(tensor)) tensor.copy_(one[0]);
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  std::string name_;
  std::string broken_;  // the first error, once there was one
};

}  // namespace

std::unique_ptr<Communicator> MakeGlooCommunicator(c10::intrusive_ptr<c10d::Store> store,
                                                   int rank, int world_size,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& name) {
  const std::string where = "gloo communicator '" + name + "' (rank " + std::to_string(rank) +
                            " of " + std::to_string(world_size) + ")";
  TORCH_CHECK(store, where, ": no store");
  TORCH_CHECK(world_size >= 1, where, ": world size must be at least 1");
  TORCH_CHECK(rank >= 0 && rank < world_size, where, ": rank is outside the world");
  TORCH_CHECK(timeout.count() > 0, where, ": timeout must be positive, got ", timeout.count(),
              " ms");
  try {
    store->setTimeout(timeout);
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("ember/gloo/" + name, store);
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(kLoopback));
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, world_size, options);
    return std::make_unique<GlooCommunicator>(std::move(group), name);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, where, ": rendezvous failed (timeout ", timeout.count(), " ms): ",
                Describe(e));
  }
}

}  // namespace ember::sdk
