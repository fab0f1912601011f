#include "ember/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "common/fnv1a.h"
#include "ember/model_sync.h"
#include "sdk/sync/error_message.h"

namespace ember {
namespace {

// What grad_accumulator returns: std::shared_ptr<Node> up to LibTorch 2.x's move of
// autograd nodes to c10::intrusive_ptr (2.15 has it), so one source builds with both.
using AccumulatorPtr =
    decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));

}  // namespace

struct DataParallel::State {
  struct Param {
    torch::Tensor tensor;
    int64_t module_index;  // in module.parameters()
    size_t bucket;
    bool ready = false;  // its hook fired in this backward pass
    AccumulatorPtr accumulator{};
    uintptr_t hook_key = 0;
  };

  // One flat buffer: the gradients of `params` in order, then one slot per parameter
  // that counts the ranks that had a gradient for it.
  struct Bucket {
    std::vector<size_t> params;  // indices into State::params
    std::vector<int64_t> offsets;
    int64_t numel = 0;
    size_t not_ready = 0;
    torch::Tensor buffer;
    // Host staging for the has-gradient flags (pinned for a CUDA bucket, so that their copy
    // into the buffer is one asynchronous transfer), and whether this rank had a gradient
    // for every parameter of the bucket in the pass being synced.
    torch::Tensor flags;
    bool all_local = false;
    std::shared_ptr<PendingCollective> pending;
  };

  State(torch::nn::Module& module, std::shared_ptr<Communicator> comm, DataParallelOptions options)
      : module(module), comm(std::move(comm)), options(options) {}

  std::string Where() const {
    return "DataParallel (rank " + std::to_string(comm->rank()) + " of " +
           std::to_string(comm->world_size()) + ")";
  }

  void AssignBuckets() {
    std::vector<torch::Tensor> all = module.parameters();
    for (int64_t i = static_cast<int64_t>(all.size()) - 1; i >= 0; --i) {
      if (!all[i].requires_grad()) continue;
      TORCH_CHECK(all[i].layout() == torch::kStrided, Where(), ": parameter ", i,
                  " is not dense");
      params.push_back(Param{all[i], i, 0});
    }
    // Buckets close when they reach their limit (first_bucket_bytes for a key's first,
    // bucket_bytes after); each is keyed by dtype and device and ordered by its first
    // parameter, so the order follows reverse registration.
    using Key = std::tuple<int, int, int>;  // dtype, device type, device index
    std::map<Key, size_t> open;             // -> bucket
    std::set<Key> closed_one;               // keys whose first bucket has closed
    std::vector<int64_t> bytes;
    const int64_t first_limit = std::min(options.first_bucket_bytes, options.bucket_bytes);
    for (size_t p = 0; p < params.size(); ++p) {
      const torch::Tensor& tensor = params[p].tensor;
      const auto key = std::make_tuple(static_cast<int>(tensor.scalar_type()),
                                       static_cast<int>(tensor.device().type()),
                                       static_cast<int>(tensor.device().index()));
      auto it = open.find(key);
      if (it == open.end()) {
        it = open.emplace(key, buckets.size()).first;
        buckets.emplace_back();
        bytes.push_back(0);
      }
      const size_t b = it->second;
      Bucket& bucket = buckets[b];
      params[p].bucket = b;
      bucket.params.push_back(p);
      bucket.offsets.push_back(bucket.numel);
      bucket.numel += tensor.numel();
      bytes[b] += tensor.numel() * static_cast<int64_t>(tensor.element_size());
      if (bytes[b] >= (closed_one.count(key) != 0 ? options.bucket_bytes : first_limit)) {
        closed_one.insert(key);
        open.erase(it);
      }
    }
    for (Bucket& bucket : buckets) {
      const torch::Tensor& first = params[bucket.params.front()].tensor;
      bucket.buffer = torch::empty({bucket.numel + static_cast<int64_t>(bucket.params.size())},
                                   first.options().requires_grad(false));
      const auto host = torch::TensorOptions().dtype(first.scalar_type());
      bucket.flags = torch::empty({static_cast<int64_t>(bucket.params.size())},
                                  first.is_cuda() ? host.pinned_memory(true) : host);
      bucket.not_ready = bucket.params.size();
    }
  }

  // FNV-1a over the bucket layout (module indices and dtypes), as an int64 for the wire.
  int64_t LayoutHash() const {
    uint64_t hash = kFnv1a64Offset;
    auto mix = [&hash](int64_t value) { hash = Fnv1a64Le(value, hash); };
    for (const Bucket& bucket : buckets) {
      mix(-1);
      for (size_t p : bucket.params) {
        mix(params[p].module_index);
        mix(static_cast<int64_t>(params[p].tensor.scalar_type()));
      }
    }
    int64_t result;
    std::memcpy(&result, &hash, sizeof(result));
    return result;
  }

  // Throws on every rank if any rank's buckets differ from rank 0's (for instance when
  // requires_grad differs).
  void CheckSameBuckets() {
    const int64_t local = LayoutHash();
    // On the parameters' device: that is where this communicator works (NCCL: CUDA only).
    const torch::Device device =
        params.empty() ? torch::Device(torch::kCPU) : params.front().tensor.device();
    std::vector<torch::Tensor> root = {torch::tensor({local}, torch::kInt64).to(device)};
    comm->Broadcast(root, 0);
    const bool same = root[0].item<int64_t>() == local;
    std::vector<torch::Tensor> mismatches = {
        torch::tensor({same ? int64_t{0} : int64_t{1}}).to(device)};
    comm->AllReduceSum(mismatches);
    const int64_t differing = mismatches[0].item<int64_t>();
    TORCH_CHECK(differing == 0, Where(), ": the gradient buckets differ from rank 0's on ",
                differing,
                " rank(s) (parameters that require grad, bucket_bytes or first_bucket_bytes "
                "differ)",
                same ? "" : "; this rank is one of them");
  }

  void RegisterHooks() {
    for (size_t p = 0; p < params.size(); ++p) {
      Param& param = params[p];
      param.accumulator = torch::autograd::impl::grad_accumulator(param.tensor);
      TORCH_CHECK(param.accumulator != nullptr, Where(), ": parameter ", param.module_index,
                  " has no gradient accumulator (is it a leaf?)");
      param.hook_key = param.accumulator->add_post_hook(
          std::make_unique<torch::autograd::utils::LambdaPostHook>(
              [this, p](const torch::autograd::variable_list& outputs,
                        const torch::autograd::variable_list& /*inputs*/) {
                OnGradReady(p);
                return outputs;
              }));
    }
  }

  void RemoveHooks() {
    for (Param& param : params) {
      if (param.accumulator != nullptr) param.accumulator->del_post_hook(param.hook_key);
    }
  }

  // Runs on an autograd thread after the parameter's gradient was accumulated.
  void OnGradReady(size_t p) {
    std::lock_guard<std::mutex> lock(mutex);
    if (no_sync) return;
    TORCH_CHECK(broken.empty(), Where(), ": unusable after an earlier error: ", broken);
    if (!in_backward) {
      in_backward = true;
      torch::autograd::Engine::get_default_engine().queue_callback([this] { FinishBackward(); });
    }
    Param& param = params[p];
    if (param.ready) {
      // AccumulateGrad runs once per backward pass: this is a new pass, and the
      // previous one ended without FinishBackward (it threw).
      broken = "a backward pass began before the previous one had finished";
      TORCH_CHECK(false, Where(), ": ", broken);
    }
    param.ready = true;
    --buckets[param.bucket].not_ready;
    Guarded([&] {
      while (next_bucket < buckets.size() && buckets[next_bucket].not_ready == 0) {
        Launch(next_bucket++);
        ++stats.buckets_launched_during_backward;
      }
    });
  }

  // Runs once when a synced backward pass has finished.
  void FinishBackward() {
    const auto start = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex);
    Guarded([&] {
      while (next_bucket < buckets.size()) {
        Launch(next_bucket++);
        ++stats.buckets_launched_at_end;
      }
      for (size_t b = 0; b < buckets.size(); ++b) {
        try {
          buckets[b].pending->Wait();
        } catch (const std::exception& e) {
          TORCH_CHECK(false, Where(), ": all-reduce of gradient bucket ", b, " of ",
                      buckets.size(), " failed: ", sdk::ErrorMessage(e));
        }
        buckets[b].pending.reset();
      }
      torch::NoGradGuard no_grad;
      for (Bucket& bucket : buckets) Unpack(bucket);
    });
    for (Param& param : params) param.ready = false;
    for (Bucket& bucket : buckets) bucket.not_ready = bucket.params.size();
    next_bucket = 0;
    in_backward = false;
    ++stats.synced_backward_passes;
    stats.finish_time += std::chrono::steady_clock::now() - start;
  }

  // Runs `f`; an exception marks the object broken before it propagates.
  template <typename F>
  void Guarded(F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      broken = sdk::ErrorMessage(e);
      throw;
    }
  }

  void Launch(size_t b) {
    torch::NoGradGuard no_grad;
    Bucket& bucket = buckets[b];
    const int64_t count = static_cast<int64_t>(bucket.params.size());
    // Which parameters had a gradient, as the buffer's last elements (summed, they count
    // the ranks that had one), staged on the host: one copy, asynchronous on a GPU.
    bucket.flags.zero_();
    bucket.all_local = true;
    for (int64_t i = 0; i < count; ++i) {
      const torch::Tensor& tensor = params[bucket.params[i]].tensor;
      torch::Tensor slot = bucket.buffer.narrow(0, bucket.offsets[i], tensor.numel());
      const torch::Tensor& grad = tensor.grad();
      if (grad.defined()) {
        TORCH_CHECK(grad.layout() == torch::kStrided, Where(), ": parameter ",
                    params[bucket.params[i]].module_index,
                    " has a sparse gradient, which is not supported");
        slot.view(tensor.sizes()).copy_(grad);
        bucket.flags[i].fill_(1);
      } else {
        slot.zero_();
        bucket.all_local = false;
      }
    }
    bucket.buffer.narrow(0, bucket.numel, count).copy_(bucket.flags, /*non_blocking=*/true);
    std::vector<torch::Tensor> tensors = {bucket.buffer};
    try {
      bucket.pending = comm->AllReduceSumAsync(tensors);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, Where(), ": launching the all-reduce of gradient bucket ", b, " of ",
                  buckets.size(), " failed: ", sdk::ErrorMessage(e));
    }
  }

  void Unpack(Bucket& bucket) {
    const int64_t count = static_cast<int64_t>(bucket.params.size());
    // Where this rank had every gradient, every count is at least 1: no need to read them
    // (on a GPU, reading them would wait for it).
    torch::Tensor counts =
        bucket.all_local ? torch::ones({count}, torch::kFloat64)
                         : bucket.buffer.narrow(0, bucket.numel, count)
                               .to(torch::kCPU, torch::kFloat64)
                               .contiguous();
    const double* ranks_with_grad = counts.data_ptr<double>();
    // The mean goes straight into .grad: one pass over the bucket, not a division in
    // place and then a copy.
    const torch::Tensor world_size =
        torch::scalar_tensor(static_cast<double>(comm->world_size()), bucket.buffer.options());
    for (int64_t i = 0; i < count; ++i) {
      if (ranks_with_grad[i] <= 0) continue;
      torch::Tensor& tensor = params[bucket.params[i]].tensor;
      torch::Tensor sum =
          bucket.buffer.narrow(0, bucket.offsets[i], tensor.numel()).view(tensor.sizes());
      if (tensor.grad().defined()) {
        torch::div_out(tensor.mutable_grad(), sum, world_size);
      } else {
        tensor.mutable_grad() = torch::div(sum, world_size);
      }
    }
  }

  torch::nn::Module& module;
  const std::shared_ptr<Communicator> comm;
  const DataParallelOptions options;
  std::vector<Param> params;  // that require grad, in reverse registration order
  std::vector<Bucket> buckets;

  mutable std::mutex mutex;  // guards everything below, and the buckets while in use
  bool no_sync = false;
  bool in_backward = false;
  size_t next_bucket = 0;  // the next bucket to launch in this backward pass
  std::string broken;      // the first error, once there was one
  DataParallelStats stats;
};

DataParallel::DataParallel(torch::nn::Module& module, std::shared_ptr<Communicator> comm,
                           DataParallelOptions options) {
  TORCH_CHECK(comm != nullptr, "DataParallel: no communicator");
  TORCH_CHECK(options.bucket_bytes > 0, "DataParallel: bucket_bytes must be positive, got ",
              options.bucket_bytes);
  TORCH_CHECK(options.first_bucket_bytes > 0,
              "DataParallel: first_bucket_bytes must be positive, got ",
              options.first_bucket_bytes);
  state_ = std::make_unique<State>(module, comm, options);
  ModelSync(module, comm).BroadcastParameters();
  state_->AssignBuckets();
  state_->CheckSameBuckets();
  try {
    state_->RegisterHooks();
  } catch (...) {
    state_->RemoveHooks();  // the hooks point into state_, which is about to go
    throw;
  }
}

DataParallel::~DataParallel() { state_->RemoveHooks(); }

DataParallel::NoSyncGuard::NoSyncGuard(DataParallel* owner) : owner_(owner), previous_(false) {
  owner_->SetNoSync(true, &previous_);
}

DataParallel::NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept
    : owner_(other.owner_), previous_(other.previous_) {
  other.owner_ = nullptr;
}

DataParallel::NoSyncGuard::~NoSyncGuard() {
  if (owner_ != nullptr) owner_->SetNoSync(previous_, nullptr);
}

DataParallel::NoSyncGuard DataParallel::NoSync() { return NoSyncGuard(this); }

void DataParallel::SetNoSync(bool no_sync, bool* previous) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (previous != nullptr) *previous = state_->no_sync;
  state_->no_sync = no_sync;
}

std::vector<std::vector<int64_t>> DataParallel::BucketLayout() const {
  std::vector<std::vector<int64_t>> layout;
  for (const State::Bucket& bucket : state_->buckets) {
    layout.emplace_back();
    for (size_t p : bucket.params) layout.back().push_back(state_->params[p].module_index);
  }
  return layout;
}

DataParallelStats DataParallel::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

Communicator& DataParallel::comm() { return *state_->comm; }

}  // namespace ember
