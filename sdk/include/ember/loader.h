// ember::Loader: batches of a stream as torch::Tensor views into the shared ring.
//
//   auto client = ember::Client::Connect().value();
//   ember::Loader loader(*client, {.job = "run1", .dataset = "fmnist-train",
//                                  .batch_size = 64, .rank = r, .world_size = w, .epochs = 2});
//   for (int epoch = 0; epoch < 2; ++epoch)
//     while (auto batch = loader.Next()) {
//       torch::Tensor x = batch->at("image"), y = batch->at("label");  // no copy
//       ...
//     }
//
// The tensors share one slot of the ring; it goes back to the daemon when the last of
// them (and the Batch) is released. Errors throw (TORCH_CHECK / c10::Error) with the
// daemon's message; the loader is for one thread.
//
// A daemon that restarts does not end training, and loader.state() checkpoints and
// resumes the job's place in its data: see ember/raw_loader.h, which this wraps.
#ifndef EMBER_LOADER_H_
#define EMBER_LOADER_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "ember/client.h"
#include "ember/loader_state.h"
#include "ember/raw_loader.h"
#include "ember/stream_reader.h"

namespace ember {

struct Batch {
  uint64_t epoch = 0;
  uint64_t index_in_epoch = 0;  // the global step of the epoch (from a resumed start)
  bool last_in_epoch = false;
  uint64_t position = 0;        // RawBatch::position
  std::vector<std::string> names;
  std::vector<torch::Tensor> tensors;  // CPU tensors viewing the ring

  // The tensor named `name` ("image", "label"); throws if there is none.
  const torch::Tensor& at(const std::string& name) const;
};

// Wraps a RawBatch as tensors whose deleters hold its slot. No copy.
Batch ToTorch(RawBatch raw);

// ember::RawLoader's batches as torch tensors: see raw_loader.h for the state,
// resuming and reconnecting.
class Loader {
 public:
  // Opens the stream (RawLoader::Open); throws with the daemon's message on failure.
  Loader(Client& client, const StreamOptions& options,
         const std::optional<LoaderState>& resume = std::nullopt,
         std::chrono::milliseconds reconnect_timeout = std::chrono::seconds(60));

  // As the constructor, with the error as a Status (its code kept) instead of a throw.
  static Result<std::unique_ptr<Loader>> Open(
      Client& client, const StreamOptions& options,
      const std::optional<LoaderState>& resume = std::nullopt,
      std::chrono::milliseconds reconnect_timeout = std::chrono::seconds(60));

  // The next batch of the current epoch; nullopt at the end of each epoch (the next call
  // starts the following one) and once the stream has ended.
  std::optional<Batch> Next();

  // As Next(), with errors as Status instead of throws (RawLoader::TryNext).
  Result<std::optional<Batch>> TryNext(const WaitCheck& check = WaitCheck());

  const LoaderState& state() const { return raw_->state(); }
  bool ended() const { return raw_->ended(); }
  uint64_t batches_per_epoch() const { return raw_->batches_per_epoch(); }
  const StreamReader& reader() const { return raw_->reader(); }
  std::chrono::nanoseconds wait_time() const { return raw_->wait_time(); }
  uint64_t batches_read() const { return raw_->batches_read(); }
  uint64_t reconnects() const { return raw_->reconnects(); }
  const RawLoader& raw() const { return *raw_; }

 private:
  explicit Loader(std::unique_ptr<RawLoader> raw) : raw_(std::move(raw)) {}
  std::unique_ptr<RawLoader> raw_;
};

}  // namespace ember

#endif  // EMBER_LOADER_H_
