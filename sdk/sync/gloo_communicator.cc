#include "sdk/sync/gloo_communicator.h"

#include <signal.h>

#include <cstdlib>
#include <algorithm>
#include <exception>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "sdk/sync/communicator_args.h"
#include "sdk/sync/error_message.h"
#include "sdk/sync/same_world.h"

namespace ember::sdk {
namespace {

constexpr const char* kLoopback = "127.0.0.1";

// Gloo writes to its TCP pairs without MSG_NOSIGNAL: once a peer has died, a write gets
// SIGPIPE, whose default action ends this process without a word instead of failing the
// collective with the peer named. Python ignores SIGPIPE, a C++ trainer may not; a
// handler the program installed itself is left alone.
void IgnoreDefaultSigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
}

// The first error of a communicator, shared with its pending collectives.
class Health {
 public:
  void Break(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_.empty()) broken_ = why;
  }
  std::string broken() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return broken_;
  }

 private:
  mutable std::mutex mutex_;
  std::string broken_;
};

// One Work per tensor; strided tensors travel as contiguous copies, copied back in Wait.
class GlooPending final : public PendingCollective {
 public:
  GlooPending(std::string where, std::chrono::milliseconds timeout,
              std::shared_ptr<Health> health)
      : where_(std::move(where)), timeout_(timeout), health_(std::move(health)) {}

  void Add(torch::Tensor target, std::vector<at::Tensor> wire, c10::intrusive_ptr<c10d::Work> work) {
    targets_.push_back(std::move(target));
    wires_.push_back(std::move(wire));
    works_.push_back(std::move(work));
  }

  void Wait() override {
    TORCH_CHECK(failure_.empty(), where_, " failed: ", failure_);
    if (done_) return;
    const std::string earlier = health_->broken();
    if (!earlier.empty()) {
      failure_ = "communicator is unusable after an earlier error: " + earlier;
      TORCH_CHECK(false, where_, " failed: ", failure_);
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (size_t i = 0; i < works_.size(); ++i) {
      try {
        // At least 1 ms: a zero timeout would mean "wait forever" to c10d.
        auto left = std::max(std::chrono::milliseconds(1),
                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                 deadline - std::chrono::steady_clock::now()));
        works_[i]->wait(left);
      } catch (const std::exception& e) {
        failure_ = "tensor " + std::to_string(i) + " of " + std::to_string(works_.size()) + " (" +
                   std::to_string(targets_[i].numel()) + " x " +
                   std::string(c10::toString(targets_[i].scalar_type())) +
                   "), timeout " + std::to_string(timeout_.count()) + " ms: " + ErrorMessage(e);
        health_->Break(where_ + ": " + failure_);
        TORCH_CHECK(false, where_, " failed: ", failure_);
      }
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < targets_.size(); ++i) {
      if (!wires_[i][0].is_same(targets_[i])) targets_[i].copy_(wires_[i][0]);
    }
    done_ = true;
    works_.clear();
    wires_.clear();
    targets_.clear();
  }

 private:
  const std::string where_;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<Health> health_;
  std::vector<torch::Tensor> targets_;
  std::vector<std::vector<at::Tensor>> wires_;
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  bool done_ = false;
  std::string failure_;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::ProcessGroupGloo> group, std::string name,
                   std::chrono::milliseconds timeout)
      : group_(std::move(group)), name_(std::move(name)), timeout_(timeout) {}

  int rank() const override { return group_->getRank(); }
  int world_size() const override { return group_->getSize(); }

  std::shared_ptr<PendingCollective> AllReduceSumAsync(
      std::vector<torch::Tensor>& tensors) override {
    const char* op = "all-reduce";
    CheckUsable(op);
    CheckTensors(tensors, op);
    auto pending = std::make_shared<GlooPending>(Where(op), timeout_, health_);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < tensors.size(); ++i) {
      torch::Tensor& tensor = tensors[i];
      std::vector<at::Tensor> wire{tensor.is_contiguous() ? tensor : tensor.contiguous()};
      c10::intrusive_ptr<c10d::Work> work;
      try {
        work = group_->allreduce(wire, c10d::AllreduceOptions());
      } catch (const std::exception& e) {
        health_->Break(ErrorMessage(e));
        TORCH_CHECK(false, Where(op), " of tensor ", i, " of ", tensors.size(),
                    " failed to launch: ", ErrorMessage(e));
      }
      pending->Add(tensor, std::move(wire), std::move(work));
    }
    return pending;
  }

  void Broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    const char* op = "broadcast";
    TORCH_CHECK(root >= 0 && root < world_size(), Where(op), ": root ", root,
                " is not a rank of this world");
    CheckUsable(op);
    CheckTensors(tensors, op);
    c10d::BroadcastOptions options;
    options.rootRank = root;
    options.rootTensor = 0;
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < tensors.size(); ++i) {
      torch::Tensor& tensor = tensors[i];
      std::vector<at::Tensor> one{tensor.is_contiguous() ? tensor : tensor.contiguous()};
      try {
        group_->broadcast(one, options)->wait(timeout_);
      } catch (const std::exception& e) {
        health_->Break(ErrorMessage(e));
        TORCH_CHECK(false, Where(op), " of tensor ", i, " of ", tensors.size(), " (",
                    tensor.numel(), " x ", tensor.scalar_type(), ") failed: ", ErrorMessage(e));
      }
      if (!one[0].is_same(tensor)) tensor.copy_(one[0]);
    }
  }

 private:
  std::string Where(const char* op) const {
    return "gloo " + std::string(op) + " (group '" + name_ + "', rank " +
           std::to_string(rank()) + " of " + std::to_string(world_size()) + ")";
  }

  // Any failure breaks the communicator for good: the ranks no longer agree on which
  // collective comes next.
  void CheckUsable(const char* op) const {
    const std::string broken = health_->broken();
    TORCH_CHECK(broken.empty(), Where(op),
                ": communicator is unusable after an earlier error: ", broken);
  }

  void CheckTensors(const std::vector<torch::Tensor>& tensors, const char* op) const {
    CheckCpuTensors(tensors, Where(op), /*bool_ok=*/true);
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  const std::string name_;
  const std::chrono::milliseconds timeout_;
  const std::shared_ptr<Health> health_ = std::make_shared<Health>();
};

}  // namespace

std::unique_ptr<Communicator> MakeGlooCommunicator(c10::intrusive_ptr<c10d::Store> store,
                                                   int rank, int world_size,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& name,
                                                   bool across_nodes) {
  const std::string where = CheckCommunicatorArgs("gloo", name, rank, world_size, timeout);
  TORCH_CHECK(store, where, ": no store");
  try {
    CheckSameWorld(*store, "ember/gloo/" + name, rank, world_size, timeout);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, where, ": rendezvous failed: ", ErrorMessage(e));
  }
  IgnoreDefaultSigpipe();
  try {
    store->setTimeout(timeout);
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("ember/gloo/" + name, store);
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (!across_nodes)
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(kLoopback));
    else if (ifname != nullptr && *ifname != '\0')
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, world_size, options);
    return std::make_unique<GlooCommunicator>(std::move(group), name, timeout);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, where, ": rendezvous failed (timeout ", timeout.count(), " ms): ",
                ErrorMessage(e));
  }
}

}  // namespace ember::sdk
