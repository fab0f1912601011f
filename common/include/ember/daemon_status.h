// What emberd reports and the SDK returns, one definition for both sides: datasets
// (DatasetSpec, TensorInfo, DatasetInfo) and the daemon's state (DaemonStatus with its
// JobStatus, RankProgress, StreamStatus, PendingSegmentStatus). Plain std values, copied
// freely; std and ember headers only, so the public SDK header ember/client.h includes it.
//
// Each struct has one Cap'n Proto counterpart in schemas/ember.capnp and one converter
// pair (common/daemon_status_rpc.h); a field added here goes into the schema and the
// converter, and daemon_status_rpc_test fails until it does.
#ifndef EMBER_DAEMON_STATUS_H_
#define EMBER_DAEMON_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ember {

// How a dataset is registered (Client::AddDataset; the daemon's catalog keeps it).
struct DatasetSpec {
  std::string name;  // [A-Za-z0-9_.-]{1,64}, not starting with '.'
  std::string format = "idx";
  std::string path;  // for idx: a directory holding the split's files
  std::string split = "train";
  // YAML text of a decode/transform pipeline (formats that decode); empty: the format's
  // default. Kept in the catalog, so the dataset does not depend on the file it came from.
  std::string pipeline{};
  // What a corrupt sample does to a stream: "fail" ends it with the error; "skip" drops
  // the sample from its batch, logs it (file, reason) and counts it.
  std::string on_error = "fail";
  // How jobs on it shuffle: "samples" (over the whole set) or "shards" (for shards read
  // through the node's cache: the shards permuted each epoch, then the samples of each
  // window of `shuffle_window` shards shuffled among themselves; formats with shards).
  std::string shuffle = "samples";
  uint32_t shuffle_window = 8;
  // Every user of the daemon may stream and inspect it; otherwise only its owner (the
  // registering uid; the daemon reads its files with that user's rights) and root. Only
  // its owner may remove it.
  bool shared = false;
};

struct TensorInfo {
  std::string name;
  std::string dtype;           // "uint8", "float32", ...
  std::vector<int64_t> shape;  // per sample
};

struct DatasetInfo {
  DatasetSpec spec;
  uint64_t count = 0;
  std::vector<TensorInfo> tensors;
  std::vector<std::string> files;
  uint64_t fingerprint = 0;  // sample count, tensors and an index digest; 0: not known
  uint32_t owner_uid = 0xffffffff;  // who registered it; 0xffffffff: not known
};

struct StreamStatus {
  uint64_t stream_id = 0;
  std::string job;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  std::string dataset;
  uint64_t epoch = 0;
  uint64_t batches_published = 0;
  uint64_t batches_consumed = 0;
  double samples_per_second = 0;  // over the last few seconds of publishing
  double ring_fill = 0;  // fraction of slots holding unread batches
  uint32_t slot_count = 0;
  uint32_t prefetch_depth = 0;  // slots emberd may fill ahead (it grows when the trainer waits)
  uint32_t slots_touched = 0;   // slots ever written: the ring memory in use
  uint64_t samples_skipped = 0;  // corrupt samples dropped (dataset on_error: skip)
  // Over the stream's life: samples and payload bytes published, samples that failed to
  // read or decode, seconds the trainer waited for a batch not ready (data stall).
  uint64_t samples_published = 0;
  uint64_t bytes_published = 0;
  uint64_t decode_errors = 0;
  double data_stall_seconds = 0;
};

// A job's ranks, and a segment's missing ranks, listed in a status at most: the lowest
// numbered ones. The counts beside each list cover all of them, listed or not, so that a
// job of 65,536 ranks costs a status what one of 1,024 does.
inline constexpr uint32_t kMaxRanksListed = 1024;

// Where one rank of a job stands (emberctl jobs).
struct RankProgress {
  uint32_t rank = 0;
  bool joined = false;
  uint64_t epoch = 0;     // its first epoch not fully consumed
  uint64_t consumed = 0;  // batches of that epoch consumed in a row from its first
  uint64_t leased = 0;    // batches handed to it, not yet consumed
  std::string node{};     // the node whose daemon it joined through; empty: this daemon
};

struct JobStatus {
  std::string job;
  uint32_t world_size = 0;
  std::string dataset;
  uint64_t epochs_started = 0;
  uint64_t batches_leased = 0;     // over the job's life
  uint64_t batches_committed = 0;  // over the job's life
  uint32_t batch_size = 0;
  uint64_t batches_per_rank = 0;  // in a full epoch
  std::vector<RankProgress> ranks;  // at most kMaxRanksListed, by rank
  uint32_t ranks_unlisted = 0;      // ranks beyond those listed
  uint32_t ranks_joined = 0;        // joined now, listed or not
  // Empty: this daemon coordinates the job. Else the HOST:PORT of the daemon that does,
  // and `ranks` lists only this node's ranks.
  std::string coordinator;
  uint64_t leases_in_flight = 0;  // leased, not yet consumed: every rank and epoch
};

// A shared-memory segment (Client::OpenSharedMemory) that some ranks have not opened.
struct PendingSegmentStatus {
  std::string job;
  std::string name;
  uint32_t world_size = 0;
  uint64_t bytes = 0;
  std::vector<uint32_t> missing_ranks;  // ascending, at most kMaxRanksListed
  uint32_t missing_unlisted = 0;        // missing ranks beyond those listed
  double age_seconds = 0;               // since it was created
};

// What a caller may see of the daemon: its datasets (and shared ones), jobs, streams and
// pending segments; the totals (shared memory, the process's numbers) are the daemon's.
struct DaemonStatus {
  std::string version;
  uint32_t pid = 0;
  double uptime_seconds = 0;
  std::vector<DatasetInfo> datasets;  // sorted by name
  std::vector<JobStatus> jobs;
  std::vector<StreamStatus> streams;
  uint64_t shm_bytes_in_use = 0;
  uint64_t shm_bytes_budget = 0;
  std::vector<PendingSegmentStatus> pending_segments;  // waiting for ranks
  uint64_t open_fds = 0;        // the daemon's; 0: unknown (/proc unreadable)
  uint64_t resident_bytes = 0;  // the daemon's resident memory; 0: unknown
};

}  // namespace ember

#endif  // EMBER_DAEMON_STATUS_H_
