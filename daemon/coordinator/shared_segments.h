// SharedSegments: the shared-memory segments that the ranks of a job on this node use to
// talk to each other directly (e.g. a shared-memory all-reduce), one per (job, name).
//
// Glossary
//   segment   a zero-filled memfd (Env::CreateSharedMemory, sealed against grow/shrink
//             only, so ranks can map it read-write and shared) handed to each rank.
//   pending   a segment that not every rank of world_size has opened yet. Only pending
//             segments are kept here; once world_size ranks have it, the registry
//             forgets it, and the memory lives on only in the ranks' descriptors and
//             mappings (nothing left behind when they exit).
//
// A rank that crashes before opening leaves its segment pending: pending segments are
// dropped `ttl_micros` after they were created (checked on every Open), and at most
// `max_pending` of them exist at once.
//
// Transport-free: the RPC adapter passes the returned segment's fd to the rank.
// Thread-safety: all methods are safe to call concurrently (one mutex).
#ifndef EMBER_DAEMON_COORDINATOR_SHARED_SEGMENTS_H_
#define EMBER_DAEMON_COORDINATOR_SHARED_SEGMENTS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/mutex.h"
#include "daemon/access/principal.h"
#include "daemon/coordinator/job_name.h"
#include "ember/daemon_status.h"
#include "ember/status.h"

namespace ember::daemon {

// A segment waiting for ranks, for status.
struct PendingSegment {
  std::string job;
  std::string name;
  uint32_t world_size = 0;
  uint64_t bytes = 0;
  std::vector<uint32_t> missing_ranks;  // not opened it yet: ascending, kMaxRanksListed at most
  uint32_t missing_unlisted = 0;        // missing ranks beyond those listed
  uint64_t age_micros = 0;              // since it was created
};

struct SharedSegmentLimits {
  uint64_t max_bytes = uint64_t{1} << 30;     // 1 GiB per segment
  uint64_t ttl_micros = 10ull * 60 * 1000000;  // a pending segment lives 10 minutes
  size_t max_pending = 1024;                   // pending segments at once
  size_t max_pending_per_owner = 64;           // of them, for jobs of one non-privileged uid
  uint32_t max_world_size = kDefaultMaxWorldSize;  // config max_world_size
};

class SharedSegments {
 public:
  // `env` (not owned, must outlive this) creates the memfds and is the clock.
  explicit SharedSegments(Env* env, SharedSegmentLimits limits = {});

  // The segment `name` of `job`, for `rank` of its `world_size` ranks on this node. The
  // first call creates a zero-filled segment of `bytes`; the other ranks get the same
  // one, and a rank that asks again while it is pending (a retry) gets it again without
  // taking another rank's place. Once every rank has it, it is forgotten and a later call
  // creates a new segment. A segment still pending after the TTL is dropped: its ranks
  // keep what they have, later calls get a new segment.
  // The returned object is the daemon's own mapping and descriptor; callers hand out
  // fd() and drop it when they no longer need it.
  // Errors (kInvalidArgument): empty job or name, world_size 0, rank not below
  // world_size, bytes 0 or above max_bytes, or world_size / bytes that differ from the
  // first call's (the message names both). kResourceExhausted if max_pending segments
  // are already pending. Errors from Env::CreateSharedMemory with the job and name in front.
  // `owner`: the job's; a new segment of a non-privileged owner with
  // max_pending_per_owner pending is kResourceExhausted too.
  Result<std::shared_ptr<SharedMemory>> Open(const std::string& job, const std::string& name,
                                             uint32_t rank, uint32_t world_size, uint64_t bytes,
                                             const Principal& owner = {});

  // Segments waiting for more ranks (expired ones included until the next Open).
  size_t NumPending() const;

  // Those segments, by (job, name), with the ranks they wait for (expired ones left out).
  // Only those of the jobs `include` takes (empty: all): nothing is built of the others.
  std::vector<PendingSegment> Pending(
      const std::function<bool(const std::string& job)>& include = {}) const;

 private:
  struct Entry {
    std::shared_ptr<SharedMemory> memory;
    uint32_t world_size = 0;
    uint64_t bytes = 0;
    std::vector<bool> has;  // [rank]: that rank got it
    uint64_t created_micros = 0;
    Principal owner;
  };

  // True if `entry` was created the TTL or more before `now_micros`.
  bool Expired(const Entry& entry, uint64_t now_micros) const;

  // Drops pending segments older than the TTL.
  void DropExpired(uint64_t now_micros) REQUIRES(mu_);

  Env* const env_;
  const SharedSegmentLimits limits_;
  mutable Mutex mu_;
  std::map<std::pair<std::string, std::string>, Entry> pending_ GUARDED_BY(mu_);  // (job, name)
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_SHARED_SEGMENTS_H_
