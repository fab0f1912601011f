// Source: the samples of one dataset, readable by many threads at once.
#ifndef EMBER_DAEMON_DATA_SOURCE_H_
#define EMBER_DAEMON_DATA_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "daemon/catalog/dataset.h"
#include "daemon/data/read_forecast.h"
#include "ember/status.h"

namespace ember::daemon {

// Where a sample is read for: augmentation randomness derives only from
// (seed, epoch, sample id), so a run is reproducible whichever thread decodes what.
struct SampleContext {
  uint64_t seed = 0;
  uint64_t epoch = 0;
};

class Source {
 public:
  virtual ~Source() = default;

  virtual const DatasetInfo& info() const = 0;

  // Writes every tensor of sample `id`: tensor t (an index into info().tensors) goes to
  // dsts[t], exactly info().tensors[t].SampleBytes() bytes. Thread-safe: decode threads
  // call it concurrently. kInvalidArgument for an id out of range; kDataLoss for corrupt
  // data (the message names the file and what is wrong).
  virtual Status ReadSample(uint64_t id, const SampleContext& context, void* const* dsts) const = 0;

  // True if ReadSample does enough work (decoding, transforms) that a batch's samples
  // should be spread over the daemon's decode pool; false for in-memory copies, which
  // the stream's producer does inline.
  virtual bool ParallelDecode() const { return false; }

  // A hint that samples `ids` will be read soon: a source that reads files starts
  // bringing them into memory (e.g. posix_fadvise WILLNEED) without waiting for them,
  // so that decode threads do not block on I/O. Called by a stream's producer for the
  // next batch while the current one decodes. Thread-safe; must not block on I/O.
  virtual void Prefetch(const uint64_t* ids, size_t count) const {
    (void)ids;
    (void)count;
  }

  // A reader (a stream) of this source tells what it will read: a source that reads
  // remote storage uses it to prefetch and evict (ReadForecast). The source holds it
  // weakly; it ends with the reader. Thread-safe; the default ignores it.
  virtual void Follow(std::weak_ptr<const ReadForecast> reader) const { (void)reader; }

 protected:
  // Ok if `id` is a sample of info(); kInvalidArgument naming it and the dataset's count
  // otherwise (what ReadSample returns first).
  Status CheckInRange(uint64_t id) const {
    const DatasetInfo& dataset = info();
    if (id < dataset.count) return Status::Ok();
    return InvalidArgument("sample " + std::to_string(id) + " is out of range: dataset '" +
                           dataset.spec.name + "' has " + std::to_string(dataset.count) +
                           " samples");
  }
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_SOURCE_H_
