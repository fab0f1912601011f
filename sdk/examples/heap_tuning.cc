#include "sdk/examples/heap_tuning.h"

#include <malloc.h>

#include <algorithm>
#include <climits>

namespace ember::examples {

bool KeepStepBuffersInHeap(size_t mmap_threshold_bytes, size_t trim_threshold_bytes) {
  // glibc caps M_MMAP_THRESHOLD at HEAP_MAX_SIZE / 2 (32 MiB on 64-bit); mallopt takes int.
  const size_t mmap_threshold = std::min(mmap_threshold_bytes, size_t{32} << 20);
  const size_t trim_threshold = std::min<size_t>(trim_threshold_bytes, INT_MAX);
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(mmap_threshold)) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, static_cast<int>(trim_threshold)) == 1;
  return mmap_ok && trim_ok;
}

}  // namespace ember::examples
