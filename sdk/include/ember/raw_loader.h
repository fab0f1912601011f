// ember::RawLoader: a rank's batches as RawBatch views into the shared ring, with what a
// training loop relies on beyond one stream: the loader state (checkpoint and resume),
// and reconnecting when the daemon restarts. Torch-free: ember/loader.h makes
// torch::Tensors of its batches, the Python module DLPack capsules.
//
// A daemon that restarts (systemd) does not end training: when the stream breaks because
// the daemon went away or shut down, TryNext() reconnects with backoff for up to
// `reconnect_timeout` and opens the stream again after the batches already received, so
// no sample is lost or served twice; past the deadline it fails, naming the daemon.
//
// Checkpoint and resume (ember/loader_state.h): save state().ToString() with the model;
// open the next run's loader with the parsed state to get exactly the samples not yet
// consumed, also with another world size or batch size.
//
// For one thread (the training loop); a RawBatch may be released from any thread.
#ifndef EMBER_RAW_LOADER_H_
#define EMBER_RAW_LOADER_H_

#include <chrono>
#include <memory>
#include <optional>

#include "ember/client.h"
#include "ember/loader_state.h"
#include "ember/status.h"
#include "ember/stream_reader.h"

namespace ember {

class RawLoader {
 public:
  // Opens the stream. With `resume`, starts where that state says (its epoch and position
  // replace options.start_epoch and start_position; the dataset must have the state's
  // fingerprint and options.seed must be the state's seed). `reconnect_timeout` 0: no
  // reconnecting (a broken stream fails at once). `client` must outlive the loader.
  static Result<std::unique_ptr<RawLoader>> Open(
      Client& client, const StreamOptions& options,
      const std::optional<LoaderState>& resume = std::nullopt,
      std::chrono::milliseconds reconnect_timeout = std::chrono::seconds(60));

  // The next batch of the current epoch; nullopt at the end of each epoch (the next call
  // starts the following one) and once the stream has ended. `check` is called while
  // waiting for a batch or between reconnect attempts (StreamReader's WaitCheck): a
  // failed check returns its Status and the next call carries on where this one stopped.
  Result<std::optional<RawBatch>> TryNext(const WaitCheck& check = WaitCheck());

  // Where the job stands after the last batch TryNext() returned (see loader_state.h):
  // at the end of an epoch, the start of the next.
  const LoaderState& state() const { return state_; }

  bool ended() const { return reader_ != nullptr && reader_->ended(); }
  uint64_t batches_per_epoch() const { return batches_per_epoch_; }
  // The epochs the loader serves, [start_epoch, end_epoch) (0: no end): as asked, but
  // counted as the share group's for a new job that joined its group late.
  uint32_t start_epoch() const { return opened_.start_epoch; }
  uint32_t end_epoch() const { return opened_.epochs; }
  // The open stream's reader; not while a reconnect is under way (TryNext interrupted).
  const StreamReader& reader() const { return *reader_; }
  // Over every stream this loader opened (reconnects included): the time spent waiting
  // for the daemon (data stall) and the batches taken.
  std::chrono::nanoseconds wait_time() const;
  uint64_t batches_read() const;
  // Times the stream was opened again after losing the daemon.
  uint64_t reconnects() const { return reconnects_; }

 private:
  RawLoader(Client& client, std::chrono::milliseconds reconnect_timeout)
      : client_(client), reconnect_timeout_(reconnect_timeout) {}
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

#endif  // EMBER_RAW_LOADER_H_
