// DatasetMemory: the bytes datasets hold in emberd's own memory, by the uid they are
// charged to (the dataset's owner, also while other users stream a shared set), bounded
// per uid (config user_limits.dataset_memory). A format that loads a whole set into
// memory (idx) charges what it will hold before it allocates it: an idx file 8 KB on
// disk with a 972 MB apparent size is refused with the numbers instead of read.
// Privileged owners (root, emberd's own uid, and datasets registered before owners were
// kept) are counted but not bounded.
//
// Thread-safety: safe to use from any thread; a Charge from one thread at a time.
#ifndef EMBER_DAEMON_DATA_DATASET_MEMORY_H_
#define EMBER_DAEMON_DATA_DATASET_MEMORY_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "daemon/access/principal.h"
#include "ember/status.h"

namespace ember::daemon {

class DatasetMemory {
 public:
  explicit DatasetMemory(uint64_t per_uid_bytes) : per_uid_bytes_(per_uid_bytes) {}

  // What one load (or probe) holds, charged to its owner until destroyed.
  class Charge {
   public:
    ~Charge();
    Charge(const Charge&) = delete;
    Charge& operator=(const Charge&) = delete;

    // Counts `bytes` more that the load is about to hold for `what` (a file). Nothing is
    // counted on failure: kResourceExhausted naming `what`, the bytes, the uid, what it
    // holds and the limit.
    Status Add(uint64_t bytes, const std::string& what);
    // The load no longer holds `bytes` of what it added.
    void Remove(uint64_t bytes);
    uint64_t bytes() const { return bytes_; }

   private:
    friend class DatasetMemory;
    Charge(DatasetMemory& memory, uid_t uid, bool bounded)
        : memory_(memory), uid_(uid), bounded_(bounded) {}
    DatasetMemory& memory_;
    const uid_t uid_;
    const bool bounded_;
    uint64_t bytes_ = 0;
  };

  // A charge to `owner`: bounded by the per-uid limit unless privileged or unknown. The
  // memory must outlive it.
  std::unique_ptr<Charge> For(const Principal& owner);

  // Bytes charged to `uid` now.
  uint64_t of(uid_t uid) const;
  uint64_t per_uid_bytes() const { return per_uid_bytes_; }

 private:
  const uint64_t per_uid_bytes_;
  mutable Mutex mu_;
  std::map<uid_t, uint64_t> by_uid_ GUARDED_BY(mu_);  // uids holding any
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_DATASET_MEMORY_H_
