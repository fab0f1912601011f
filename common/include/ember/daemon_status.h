// What emberd reports and the SDK returns, one definition for both sides: datasets
// (DatasetSpec, TensorInfo, DatasetInfo, DatasetDetails, RegistrationProgress), the
// daemon's state (DaemonStatus with its JobStatus, RankProgress, StreamStatus,
// PendingSegmentStatus, DecodeWorkerStatus) and the node's shard cache (ShardCacheStatus, ShardCacheEntry,
// ShardCacheCleared). Plain std values, copied freely; std and ember headers only, so the
// public SDK header ember/client.h includes it.
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
  // For s3:// paths: the S3 endpoint its objects are read from, "http(s)://HOST[:PORT]"
  // (no path, query or user); empty: emberd's configured endpoint. Region and credentials
  // stay emberd's own (its AWS environment and files).
  std::string endpoint{};
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
  std::string share;            // the share group it reads; empty: none
  uint64_t shared_batches = 0;  // batches served from the group's rows, not decoded for it
  uint64_t remote_rows = 0;     // rows remote decode workers decoded for it
};

// A remote decode worker of this node (config decode_workers): another node's emberd
// that decodes parts of this node's streams' batches. Counters over the daemon's life.
struct DecodeWorkerStatus {
  std::string address;       // HOST:PORT
  bool up = false;           // false: left out after a failed call until its retry
  std::string last_error;    // why its last failed call failed; empty: none failed
  uint64_t calls = 0;
  uint64_t rows = 0;         // decoded by it and written into slots
  uint64_t bytes = 0;        // of those rows
  uint64_t failed_calls = 0;  // their rows were decoded on this node instead
  double rows_per_second = 0;  // its measured rate
  double share = 0;  // of all rows this node's streams decoded (here and remotely), 0..1
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
  // The node's remote decode workers (config decode_workers), in config order; shown to
  // every caller (they are the node's, like the totals).
  std::vector<DecodeWorkerStatus> decode_workers;
};

// How far a registration in progress (Client::AddDataset) has got, for the user who
// registers it (emberctl dataset add's progress). Formats with shards (webdataset, mds)
// report shards and bytes as they index them; the others none.
struct RegistrationProgress {
  std::string dataset;
  uint64_t shards_done = 0;    // indexed so far
  uint64_t shards_total = 0;   // 0: not listed yet, or a format without shards
  uint64_t bytes_done = 0;     // the sizes of the shards indexed so far
  double elapsed_seconds = 0;  // since the daemon took the registration
};

// A dataset as `emberctl dataset inspect` shows it: its DatasetInfo and what it costs the
// node.
struct DatasetDetails {
  DatasetInfo info;
  // Where it was registered from: info.spec.path, a URL without user, password or query.
  std::string source;
  uint64_t shards = 0;       // formats with shards; 0: none (or registered before counting)
  uint64_t index_bytes = 0;  // what its format holds in emberd's memory (its index), charged
                             // to its owner's dataset_memory; 0: nothing, or not known
  bool remote = false;       // its shards are read through the node's shard cache
  uint64_t shards_cached = 0;  // remote: its shards in the cache now
  uint64_t bytes_cached = 0;   // and their bytes
};

// A shard in the node's cache.
struct ShardCacheEntry {
  std::string url;      // without user, password or query
  std::string dataset;  // a dataset of the caller's (or shared) that reads it; empty: none
  uint64_t bytes = 0;
  bool in_use = false;  // a reader holds it: neither evicted nor cleared now
};

// At most this many entries are listed in a ShardCacheStatus (the others are counted).
inline constexpr uint32_t kMaxCacheEntriesListed = 10000;

// The node's shard cache (emberctl cache). The totals and counters are the node's; the
// entries only those of datasets the caller may read (all of them for root and emberd's
// own user), by URL.
struct ShardCacheStatus {
  uint64_t limit_bytes = 0;  // cache_limit
  uint64_t bytes = 0;        // held now
  uint64_t entries = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;         // downloads started
  uint64_t fetched_bytes = 0;  // bytes downloaded
  uint64_t evictions = 0;
  uint64_t damaged = 0;        // entries found damaged and removed
  uint64_t range_reads = 0;    // reads by range GET, around the cache
  uint64_t range_bytes = 0;
  std::vector<ShardCacheEntry> listed;
  uint64_t entries_unlisted = 0;  // entries not listed (another user's, or past the limit)
  uint64_t bytes_unlisted = 0;
};

// What clearing the shard cache did.
struct ShardCacheCleared {
  uint64_t entries = 0;  // removed
  uint64_t bytes = 0;    // freed
  uint64_t in_use = 0;   // kept: a reader holds them
};

}  // namespace ember

#endif  // EMBER_DAEMON_STATUS_H_
