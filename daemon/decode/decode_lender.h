// DecodeLender: the worker side of remote decoding. Another node's stream asks this daemon
// (a decode rows stream, config lend_decode) to decode samples of a dataset registered here
// under the same name and fingerprint; the lender reads them from its own copy with the
// dataset's pipeline, on this daemon's decode pool, and hands the rows back
// (DecodedRows, daemon/decode/decode_request.h). Transport-free: daemon/rpc/decode_rows
// translates.
//
// Glossary
//   request     one DecodeRequest: up to kMaxDecodeIds samples of one dataset.
//   in flight   a request accepted and not yet answered (waiting for its dataset to load,
//               or decoding); at most DecodeLenderLimits::max_in_flight at once.
//   held        a dataset loaded for lending stays loaded (held) until no request has
//               used it for DecodeLenderLimits::hold_idle, so that a node that only
//               lends does not load it again for every request.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef EMBER_DAEMON_DECODE_DECODE_LENDER_H_
#define EMBER_DAEMON_DECODE_DECODE_LENDER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "daemon/catalog/catalog.h"
#include "daemon/data/dataset_cache.h"
#include "daemon/decode/decode_request.h"
#include "daemon/stream/decode_pool.h"
#include "ember/status.h"

namespace ember::daemon {

struct DecodeLenderLimits {
  // The most bytes of rows one request may ask for (all its tensors' rows).
  uint64_t max_bytes = 256ull << 20;
  // Requests in flight at once; more are refused (kResourceExhausted "busy").
  uint32_t max_in_flight = 16;
  // How long a request waits for its dataset to load before it fails
  // (kDeadlineExceeded).
  std::chrono::milliseconds load_timeout{60000};
  // How long a dataset stays loaded after the last request that used it.
  std::chrono::milliseconds hold_idle{60000};
};

class DecodeLender {
 public:
  // Where a dataset's samples come from: DatasetCache::Get in the daemon. Called on the
  // thread that calls Decode; must not block (a future that is not ready yet is waited
  // for elsewhere).
  using SourceLoader = std::function<DatasetCache::SourceFuture(const DatasetInfo&)>;
  // A request's answer.
  using Done = std::function<void(Result<DecodedRows>)>;

  struct Stats {
    uint64_t requests = 0;     // accepted
    uint64_t rows = 0;         // rows answered (failed ones included)
    uint64_t bytes = 0;        // bytes of rows answered
    uint64_t failed_rows = 0;  // rows answered as failed (DecodedRows::failed)
    uint64_t refused = 0;      // requests refused before decoding (a check, or busy)
    uint64_t failed = 0;       // accepted requests answered with an error (their load)
    uint32_t in_flight = 0;    // now
  };

  // None owned; all must outlive the lender. Starts a thread that waits for loads.
  DecodeLender(Catalog* catalog, SourceLoader load_source, DecodePool* pool,
               DecodeLenderLimits limits = {});
  // Answers the requests waiting for a load (kCancelled), stops the decoding of those in
  // flight after their current sample (kCancelled), and waits until each has answered.
  ~DecodeLender();
  DecodeLender(const DecodeLender&) = delete;
  DecodeLender& operator=(const DecodeLender&) = delete;

  // Decodes the samples `request.ids` of `request.dataset` and calls `done` exactly once:
  // with the rows (a sample that failed has zeros there and an entry in `failed`, its
  // status with the dataset and sample id as context), or with why the request failed.
  // Never blocks: `done` is called on a decode pool thread, the lender's load waiter, or
  // (a refusal, or a load that has already failed) on the caller's thread before Decode
  // returns; never under a lock of the lender's. Refusals:
  //   kInvalidArgument     ids empty or more than kMaxDecodeIds; an id not below the
  //                        dataset's count (naming its index and value)
  //   kNotFound            DatasetNotFound: no such dataset, or `request.caller` may not
  //                        read it (MayRead; the same message, so that it leaks nothing)
  //   kFailedPrecondition  request.fingerprint is not 0 and not the dataset's here
  //                        (naming both)
  //   kResourceExhausted   the rows are more than max_bytes; max_in_flight requests are
  //                        in flight ("busy")
  // Once accepted: the load's error, kDeadlineExceeded when the dataset has not loaded
  // within load_timeout, kCancelled when the lender is destroyed meanwhile.
  // `buffer`: memory for the rows, e.g. an earlier answer's (its bytes are written over, so
  // a caller that sends answers one after the other touches and zeroes no new pages).
  void Decode(DecodeRequest request, Done done, std::vector<uint8_t> buffer = {});

  Stats stats() const;

 private:
  struct Request;  // an accepted request (decode_lender.cc)
  struct Waiting {
    std::shared_ptr<Request> request;
    DatasetCache::SourceFuture future;
    std::chrono::steady_clock::time_point deadline;
  };
  struct Held {
    std::shared_ptr<const Source> source;
    std::chrono::steady_clock::time_point last_used;
  };

  // The checks before a request is accepted; Ok and the dataset's info if it passes.
  Result<DatasetInfo> Check(const DecodeRequest& request) const;
  // Answers a refused request (counted in refused).
  void Refuse(const Done& done, Status why);
  // The source has loaded: holds it, and spreads the request's rows over the pool.
  void Start(std::shared_ptr<Request> request, std::shared_ptr<const Source> source);
  // Decodes rows of `request` until none is left; the last task to finish answers.
  void DecodeRows(const std::shared_ptr<Request>& request);
  // Answers an accepted request and lets it leave the in-flight count.
  void Finish(Request& request, Result<DecodedRows> answer);
  // The load waiter: starts requests whose source is ready, fails those past their
  // deadline, and lets go of held sources idle for hold_idle.
  void WaitForLoads();

  Catalog* const catalog_;
  const SourceLoader load_source_;
  DecodePool* const pool_;
  const DecodeLenderLimits limits_;

  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> requests_{0}, rows_{0}, bytes_{0}, failed_rows_{0}, refused_{0},
      failed_{0};

  mutable Mutex mu_;
  uint32_t in_flight_ GUARDED_BY(mu_) = 0;
  std::vector<Waiting> waiting_ GUARDED_BY(mu_);
  std::map<std::string, Held> held_ GUARDED_BY(mu_);  // by dataset name
  CondVar changed_;  // in_flight_, waiting_ or stopping_ changed
  std::thread waiter_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DECODE_DECODE_LENDER_H_
