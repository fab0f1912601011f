// The SDK's ring reader over an in-process Stream (tests that link the daemon and the SDK).
#ifndef EMBER_TESTS_SUPPORT_RING_READER_TESTING_H_
#define EMBER_TESTS_SUPPORT_RING_READER_TESTING_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "daemon/stream/stream.h"
#include "ember/stream_reader.h"

namespace ember::daemon {

// Maps `stream`'s ring (and its share group's rows, if any) as a trainer would; fails the
// test if the reader refuses them.
std::unique_ptr<StreamReader> ReaderOf(const Stream& stream);

// A batch of PatternSource rows (image, label, sample_id) decoded with `seed`: checks each
// row's image and label against its sample id; returns the ids.
std::vector<uint64_t> CheckPatternRows(const RawBatch& batch, uint64_t seed);

// Reads `reader` to its end (Next() gives nullopt at each epoch's end), checking every row
// as CheckPatternRows does: each epoch's ids. `after_batch(n)` runs after the n-th batch.
std::map<uint64_t, std::multiset<uint64_t>> ReadPatternRows(
    StreamReader& reader, uint64_t seed, const std::function<void(int)>& after_batch = {});

// The ids 0..count-1, once each: an epoch read whole.
std::multiset<uint64_t> AllIds(uint64_t count);

}  // namespace ember::daemon

#endif  // EMBER_TESTS_SUPPORT_RING_READER_TESTING_H_
