// The SDK's implementation of StreamReader over a mapped ring (internal).
#ifndef EMBER_SDK_SRC_RING_READER_H_
#define EMBER_SDK_SRC_RING_READER_H_

#include <functional>
#include <memory>

#include "ember/status.h"
#include "ember/stream_reader.h"

namespace ember::sdk {

// Maps the ring in `fd` (the reader takes ownership of the fd and closes it once mapped)
// and checks its header against the layout, the mapping's size and `info`. `alive`
// reports whether the daemon connection is still up; `stream_handle` keeps the
// daemon-side stream open and is dropped when the reader is destroyed.
// The ring is hostile input: a bad header is kDataLoss naming the field ("ring header:
// slot_count ..."), and so is a bad slot in Next() ("ring slot 2 (batch 5):
// tensors[0].offset ..."), which also ends the stream. Never reads outside the mapping.
Result<std::unique_ptr<StreamReader>> OpenRingReader(int fd, const StreamInfo& info,
                                                     std::function<bool()> alive,
                                                     std::shared_ptr<void> stream_handle);

}  // namespace ember::sdk

#endif  // EMBER_SDK_SRC_RING_READER_H_
