// StreamReader: the trainer's end of one ring. Torch-free; ember/loader.h wraps it as
// torch::Tensor batches.
//
// Next() hands out batches in stream order as views into the shared mapping (no copy).
// A RawBatch keeps its slot; the slot goes back to the daemon when the last copy of the
// RawBatch (and so the last tensor built on it) is destroyed, from any thread.
// The reader itself is for one thread (the training loop).
#ifndef EMBER_STREAM_READER_H_
#define EMBER_STREAM_READER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/ring_layout.h"
#include "ember/status.h"

namespace ember {

struct RawTensor {
  std::string name;
  ring::DType dtype;
  std::vector<int64_t> shape;  // shape[0] is the batch dimension
  void* data = nullptr;        // inside the ring mapping, or (a share group's rows) a
                               // shared region's, which is read-only
  uint64_t nbytes = 0;
};

class SlotHandle;  // hands a ring slot back to the daemon when destroyed

struct RawBatch {
  uint64_t epoch = 0;
  uint64_t index_in_epoch = 0;
  bool last_in_epoch = false;
  uint64_t position = 0;  // the epoch's order is consumed up to here once every rank
                          // consumed this batch's global step (LoaderState::position)
  uint32_t num_samples = 0;
  std::vector<RawTensor> tensors;
  std::shared_ptr<SlotHandle> slot;  // the slot is held while any copy lives
};

struct StreamInfo {
  uint64_t stream_id = 0;
  uint32_t slot_count = 0;
  uint64_t slot_size = 0;
  uint64_t ring_bytes = 0;
  uint64_t batches_per_epoch = 0;  // per rank
  uint64_t samples_per_epoch = 0;  // whole dataset
  uint64_t fingerprint = 0;        // the dataset's
  std::string share;               // the share group it reads; empty: none
  // The epochs it serves, [start_epoch, epochs) (epochs 0: no end): as asked, except for a
  // new job that joined its share group late (it starts at the group's next epoch and
  // keeps its number of epochs).
  uint32_t start_epoch = 0;
  uint32_t epochs = 0;
};

// Called about every 100 ms while StreamReader::Next waits for the daemon, on the waiting
// thread. A Status other than ok ends the wait: Next returns it and the stream stays as it
// was (a later Next waits for the same batch). For interrupting a wait (Python's Ctrl-C).
using WaitCheck = std::function<Status()>;

class StreamReader {
 public:
  virtual ~StreamReader() = default;

  // The next batch of the current epoch, or nullopt once the current epoch is over
  // (the following call starts the next epoch) or the stream has ended (see ended()).
  // Blocks while the daemon is still filling the slot, calling `check` (if set) as
  // WaitCheck says. Errors: kDataLoss (the daemon stopped the stream on bad data; the
  // message names the file), kUnavailable (the daemon went away), kCancelled (the daemon
  // closed the stream), kFailedPrecondition (every slot is held by a live batch), or the
  // check's.
  virtual Result<std::optional<RawBatch>> Next(const WaitCheck& check) = 0;
  Result<std::optional<RawBatch>> Next() { return Next(WaitCheck()); }

  // True once every requested epoch has been delivered.
  virtual bool ended() const = 0;

  virtual const StreamInfo& info() const = 0;

  // The ring mapping, for checks that batch memory lies inside it (tensors in a shared
  // region lie outside it).
  virtual const void* ring_base() const = 0;
  virtual size_t ring_size() const = 0;

  // Total time Next() spent waiting for the daemon (data stall), and batches taken. The
  // ring reader also publishes the wait in the ring, so emberd's status and metrics show
  // it per stream.
  virtual std::chrono::nanoseconds wait_time() const = 0;
  virtual uint64_t batches_read() const = 0;
};

}  // namespace ember

#endif  // EMBER_STREAM_READER_H_
