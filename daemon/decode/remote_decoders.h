// RemoteDecoders: the trainer node's side of remote decode workers (config decode_workers):
// which rows of a batch go to which worker daemon, the calls to them, and what each has
// done. A stream splits each batch it decodes (Split): the workers that are up get parts
// from the end of the batch in proportion to their measured rates, this node keeps the
// rest and decodes it as before; a part whose call fails (refused, connection lost, past
// the call timeout) is decoded here instead, so nothing is lost and no row is written
// twice (the stream writes a part's rows either from the answer or locally, never both).
// A worker whose call failed is left out for retry_after (doubling up to 30 s), then tried
// again with its share.
//
// Calls go out from `in_flight` caller threads per worker, each blocking in its channel
// (which reads the rows straight into the slot), so a stream never blocks on the network.
//
// Thread-safety: all methods from any thread.
#ifndef EMBER_DAEMON_DECODE_REMOTE_DECODERS_H_
#define EMBER_DAEMON_DECODE_REMOTE_DECODERS_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "daemon/decode/decode_channel.h"
#include "daemon/decode/decode_request.h"
#include "ember/status.h"

namespace ember::daemon {

struct RemoteDecodersOptions {
  std::chrono::milliseconds call_timeout{10000};
  std::chrono::milliseconds retry_after{1000};
  unsigned in_flight = 3;  // calls at once per worker
};

struct DecodeWorkerStats {
  std::string address;
  bool up = true;           // false: left out until its retry
  std::string last_error;   // why its last failed call failed
  uint64_t calls = 0;
  uint64_t rows = 0;        // decoded by it and written into slots
  uint64_t bytes = 0;       // of those rows
  uint64_t failed_calls = 0;  // their rows were decoded here instead
  double rows_per_second = 0;  // its measured rate (rows of a call / the time since the
                               // call began or the worker's previous answer, the later)
  double share = 0;            // of all rows the streams decoded (here and remotely)
};

class RemoteDecoders {
 public:
  struct Worker {
    std::string address;      // HOST:PORT, for messages and status
    DecodeChannel* channel;   // must outlive the object
  };
  RemoteDecoders(std::vector<Worker> workers, RemoteDecodersOptions options);
  // Shuts down and joins the caller threads.
  ~RemoteDecoders();
  // Answers every call not yet made with kCancelled, cancels those in progress (their
  // parts are decoded here) and stops the caller threads. Idempotent.
  void Shutdown();

  // A worker's part of a batch: rows [begin, end).
  struct Part {
    size_t worker = 0;
    uint64_t begin = 0, end = 0;
  };
  // The parts of a batch of `rows` rows for the workers that are up, in proportion to
  // their rates and `local_rows_per_second` (this node's, as the stream measures it; 0:
  // not known yet, taken as equal to a worker's), from the end of the batch; this node
  // keeps [0, the first part's begin), at least one row; a worker gets at least one row
  // (its rate stays measured). Empty when no worker is up.
  // A part has at most `max_rows` rows (so that an answer stays a few MiB).
  std::vector<Part> Split(uint64_t rows, double local_rows_per_second,
                          uint64_t max_rows = kMaxDecodeIds);
  // Calls worker `worker`, whose rows are read into `into` (DecodeChannel::Decode); `done`
  // runs once on one of its caller threads (or on this thread after Shutdown) with the
  // answer or the call's error, after the last write into `into`.
  using Done = std::function<void(Result<RemoteAnswer>)>;
  void Send(size_t worker, DecodeRequest request, RowsDestination into, Done done);
  // Rows this node decoded itself for streams (for the workers' shares).
  void CountLocal(uint64_t rows);
  std::vector<DecodeWorkerStats> Stats() const;
  size_t size() const { return workers_.size(); }

 private:
  struct Call {
    DecodeRequest request;
    RowsDestination into;
    Done done;
  };
  struct State;
  void CallerLoop(size_t worker);
  void Finished(size_t worker, uint64_t rows, uint64_t bytes,
                std::chrono::steady_clock::time_point began, const Status& error);

  const std::vector<Worker> workers_;
  const RemoteDecodersOptions options_;

  mutable Mutex mu_;
  CondVar queued_;
  std::vector<State> states_ GUARDED_BY(mu_);
  uint64_t local_rows_ GUARDED_BY(mu_) = 0;
  bool shut_down_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> callers_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DECODE_REMOTE_DECODERS_H_
