// The SDK's implementation of StreamReader over a mapped ring (internal).
#ifndef EMBER_SDK_SRC_RING_READER_H_
#define EMBER_SDK_SRC_RING_READER_H_

#include <functional>
#include <memory>

#include "ember/status.h"
#include "ember/stream_reader.h"

namespace ember::sdk {

// Maps the ring in `fd` and checks its header against the layout, the mapping's size and
// `info`. A ring with shared regions (a share group's stream) has its rows in `shared_fd`
// (-1: none): each region is mapped twice back to back, read-only, so that rows wrapping
// past its end are contiguous. The reader takes ownership of both fds and closes them once
// mapped (also on error); the mappings last as long as the reader and its batches.
// `alive` reports whether the daemon connection is still up; `stream_handle` keeps the
// daemon-side stream open and is dropped when the reader is destroyed.
// The ring is hostile input: a bad header is kDataLoss naming the field ("ring header:
// slot_count ...", "ring header: shared[1].bytes ...", shared_count when there is no
// shared_fd), and so is a bad slot in Next() ("ring slot 2 (batch 5): tensors[0].offset
// ...", "... tensors[0].region ..."), which also ends the stream. Never reads outside the
// mappings.
Result<std::unique_ptr<StreamReader>> OpenRingReader(int fd, int shared_fd,
                                                     const StreamInfo& info,
                                                     std::function<bool()> alive,
                                                     std::shared_ptr<void> stream_handle);

}  // namespace ember::sdk

#endif  // EMBER_SDK_SRC_RING_READER_H_
