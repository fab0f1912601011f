// Source: the samples of one dataset, readable by many threads at once.
#ifndef EMBER_DAEMON_DATA_SOURCE_H_
#define EMBER_DAEMON_DATA_SOURCE_H_

#include <cstdint>
#include <memory>

#include "daemon/catalog/dataset.h"
#include "ember/status.h"

namespace ember::daemon {

class Source {
 public:
  virtual ~Source() = default;

  virtual const DatasetInfo& info() const = 0;

  // Writes sample `id`'s tensor number `tensor` (an index into info().tensors) to `dst`,
  // exactly info().tensors[tensor].SampleBytes() bytes. Thread-safe.
  // kInvalidArgument for an id or tensor out of range; kDataLoss for corrupt data
  // (message names the file and offset).
  virtual Status ReadSample(uint64_t id, size_t tensor, void* dst) const = 0;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_SOURCE_H_
