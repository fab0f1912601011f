// The SDK's implementation of StreamReader over a mapped ring (internal).
#ifndef EMBER_SDK_SRC_RING_READER_H_
#define EMBER_SDK_SRC_RING_READER_H_

#include <functional>
#include <memory>

#include "ember/status.h"
#include "ember/stream_reader.h"

namespace ember::sdk {

// Maps the ring in `fd` (the reader takes ownership of the fd and closes it once mapped)
// and checks its header against `info`. `alive` reports whether the daemon connection is
// still up; `stream_handle` keeps the daemon-side stream open and is dropped when the
// reader is destroyed. kDataLoss if the header is not a ring of this version.
Result<std::unique_ptr<StreamReader>> OpenRingReader(int fd, const StreamInfo& info,
                                                     std::function<bool()> alive,
                                                     std::shared_ptr<void> stream_handle);

}  // namespace ember::sdk

#endif  // EMBER_SDK_SRC_RING_READER_H_
