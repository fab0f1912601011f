// A file mapped MAP_SHARED faults with SIGBUS where it is read past its end, and its end
// can move: a user may truncate its own dataset file while emberd streams it. Unguarded,
// that kills the daemon (every user's streams with it). A guarded mapping turns the fault
// into a page of zeros and a flag its reader checks after reading (MappedFile::shrunk),
// so a shrinking file is an error of the streams that read it, not a crash.
//
// The SIGBUS handler (installed with the first guard) looks the faulting address up in a
// fixed table of guarded ranges; a fault outside them restores the handler that was there
// before and lets the access fault again (the default: the process dies, as without the
// guard). Thread-safe; the handler takes no lock.
#ifndef EMBER_COMMON_MAPPING_GUARD_H_
#define EMBER_COMMON_MAPPING_GUARD_H_

#include <atomic>
#include <cstddef>

namespace ember {

// The most mappings guarded at once; GuardMapping past it guards nothing.
inline constexpr size_t kMaxGuardedMappings = 16384;

// Guards [data, data + size) (a mapping of `size` bytes at `data`): a SIGBUS reading it
// maps zeros over the faulting page and sets *shrunk. False if the table is full.
bool GuardMapping(const void* data, size_t size, std::atomic<bool>* shrunk);

// Ends the guard of the mapping at `data`, before it is unmapped. No-op if not guarded.
void UnguardMapping(const void* data);

}  // namespace ember

#endif  // EMBER_COMMON_MAPPING_GUARD_H_
