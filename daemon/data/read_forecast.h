// ReadForecast: what one reader of a source (a stream: one rank of a job) reads next, as
// far as its plan is known (the rest of its epoch and the next one), in the reader's
// batches counted from the one it reads now. Every daemon computes its ranks' plans from
// (seed, epoch) (daemon/coordinator/epoch_plan.h), so a source that reads from remote
// storage can fetch exactly what its readers need next and evict what they need last.
// A hint: a change of the job's membership may alter the plan; nothing depends on it for
// correctness.
//
// Thread-safe: sources call it from decode and fetch threads while the reader advances.
#ifndef EMBER_DAEMON_DATA_READ_FORECAST_H_
#define EMBER_DAEMON_DATA_READ_FORECAST_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace ember::daemon {

class ReadForecast {
 public:
  virtual ~ReadForecast() = default;

  // The batches the reader has started so far (grows by one per batch): a source asks
  // again for what is upcoming once this moved on.
  virtual uint64_t Batches() const = 0;

  // The sample ids of the reader's next `batches` batches after the current one, nearest
  // first.
  virtual std::vector<uint64_t> Upcoming(uint64_t batches) const = 0;

  // In how many batches the reader next reads a sample whose id is in [begin, end) (0:
  // the current one), or nullopt if not within the current and the next epoch.
  virtual std::optional<uint64_t> NextRead(uint64_t begin, uint64_t end) const = 0;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_READ_FORECAST_H_
