// The SDK's ring reader over an in-process Stream (tests that link the daemon and the SDK).
#ifndef EMBER_TESTS_SUPPORT_RING_READER_TESTING_H_
#define EMBER_TESTS_SUPPORT_RING_READER_TESTING_H_

#include <memory>

#include "daemon/stream/stream.h"
#include "ember/stream_reader.h"

namespace ember::daemon {

// Maps `stream`'s ring (and its share group's rows, if any) as a trainer would; fails the
// test if the reader refuses them.
std::unique_ptr<StreamReader> ReaderOf(const Stream& stream);

}  // namespace ember::daemon

#endif  // EMBER_TESTS_SUPPORT_RING_READER_TESTING_H_
