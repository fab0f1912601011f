// Keeps a training process's per-step tensors in the heap.
//
// A CPU training step allocates and frees the same activation and gradient buffers every
// step (a few MB to tens of MB each). glibc serves allocations above its mmap threshold
// with fresh mmaps and gives the top of the heap back to the kernel above its trim
// threshold; both thresholds adapt to the allocation history, so depending on what a
// process happened to free first, every step may re-fault its buffers page by page
// (measured: 3,300 page faults and ~10 ms of kernel time per step of the example CNN).
// Fixing the thresholds well above one step's working set makes the heap reuse them.
// (PyTorch's CPU performance guide suggests jemalloc or tcmalloc for the same reason.)
#ifndef EMBER_SDK_EXAMPLES_HEAP_TUNING_H_
#define EMBER_SDK_EXAMPLES_HEAP_TUNING_H_

#include <cstddef>

namespace ember::examples {

// Sets glibc's mmap threshold to `mmap_threshold_bytes` (at most 32 MiB) and its trim
// threshold to `trim_threshold_bytes` (freed memory at the top of the heap beyond that
// goes back to the kernel; a ResNet-18 step at batch 32 still re-faulted with 128 MiB).
// Returns false if glibc refused (the process runs on unchanged).
bool KeepStepBuffersInHeap(size_t mmap_threshold_bytes = size_t{32} << 20,
                           size_t trim_threshold_bytes = size_t{1} << 30);

}  // namespace ember::examples

#endif  // EMBER_SDK_EXAMPLES_HEAP_TUNING_H_
