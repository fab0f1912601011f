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
// A daemon that restarts (systemd) does not end training: when the stream breaks because
// the daemon went away or shut down, Next() reconnects with backoff for up to
// `reconnect_timeout` and opens the stream again after the batches already received, so
// no sample is lost or served twice; past the deadline it throws, naming the daemon.
//
// Checkpoint and resume (ember/loader_state.h): save loader.state().ToString() with the
// model; construct the next run's Loader with the parsed state to get exactly the samples
// not yet consumed, also with another world size or batch size.
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

class Loader {
 public:
  // Opens the stream; throws with the daemon's message on failure. With `resume`, starts
  // where that state says (its epoch and position replace options.start_epoch and
  // start_position; the dataset must have the state's fingerprint and options.seed must
  // be the state's seed).
  // `reconnect_timeout` 0: no reconnecting (a broken stream throws at once).
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

  // As Next(), with errors as Status instead of throws, and `check` called while waiting
  // for a batch or between reconnect attempts (StreamReader's WaitCheck): a failed check
  // returns its Status and the next call carries on where this one stopped.
  Result<std::optional<Batch>> TryNext(const WaitCheck& check = WaitCheck());

  // Where the job stands after the last batch Next() returned (see loader_state.h):
  // at the end of an epoch, the start of the next.
  const LoaderState& state() const { return state_; }

  bool ended() const { return reader_ != nullptr && reader_->ended(); }
  uint64_t batches_per_epoch() const { return batches_per_epoch_; }
  // The open stream's reader; not while a reconnect is under way (TryNext interrupted).
  const StreamReader& reader() const { return *reader_; }
  // Over every stream this loader opened (reconnects included): the time spent waiting
  // for the daemon (data stall) and the batches taken.
  std::chrono::nanoseconds wait_time() const;
  uint64_t batches_read() const;
  // Times the stream was opened again after losing the daemon.
  uint64_t reconnects() const { return reconnects_; }

 private:
  struct Opening {};  // for Open: the stream is opened by Init
  Loader(Opening, Client& client, std::chrono::milliseconds reconnect_timeout);
  Status Init(const StreamOptions& options, const std::optional<LoaderState>& resume);

  // After the stream broke with `why`: reconnects and opens it again, or returns why not.
  Result<std::optional<RawBatch>> Reconnect(const Status& why, const WaitCheck& check);

  Client& client_;
  StreamOptions opened_;  // as first opened
  const std::chrono::milliseconds reconnect_timeout_;
  std::unique_ptr<StreamReader> reader_;
  LoaderState state_;
  uint64_t received_epoch_ = 0;  // the trainer received batches [0, received_) of it
  uint64_t received_ = 0;
  uint64_t reconnects_ = 0;
  uint64_t batches_per_epoch_ = 0;
  std::chrono::nanoseconds earlier_wait_{0};  // of the readers before reader_
  uint64_t earlier_batches_ = 0;
  std::optional<Status> reconnecting_;  // why, while a reconnect was interrupted by a check
};

}  // namespace ember

#endif  // EMBER_LOADER_H_
