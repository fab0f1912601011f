# Ember's control path: the RPC interface emberd serves on its unix socket.
# The data path (batches) never crosses RPC; it goes through shared-memory rings whose
# layout is common/include/ember/ring_layout.h.
#
# Errors travel as Cap'n Proto exceptions whose description starts with
# "<status code name>: " (see ember/status.h) followed by the message.

@0xdb126e7b5ef1749e;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("ember::rpc");

# Limits: `name` is 1..64 characters of letters, digits, '_', '.' and '-', not starting with
# '.'. The other fields have no length limit yet beyond the message size (see Daemon).
struct DatasetSpec {
  name @0 :Text;
  format @1 :Text;      # "idx", "imagefolder", "packed", "tokens" or a plugin's format
  path @2 :Text;        # idx, imagefolder, packed: a directory; tokens: a file;
                        # a plugin format: whatever the plugin reads
  split @3 :Text;       # idx: "train" or "test"; the other formats record it only
  pipeline @4 :Text;    # YAML text of the decode/transform pipeline (tokens: its options);
                        # empty: the format's default
  onError @5 :Text;     # "fail" (default when empty) or "skip"
  shared @6 :Bool;      # every user of the daemon may stream and inspect it (see Daemon)
  shuffle @7 :Text;     # "samples" (default when empty) or "shards" (formats with shards)
  shuffleWindow @8 :UInt32 = 8;   # shards shuffled together with shuffle "shards"
  endpoint @9 :Text;    # s3:// paths: "http(s)://HOST[:PORT]" their objects are read from
                        # (emberd's region and credentials); empty: emberd's endpoint
}

struct TensorSpec {
  name @0 :Text;        # "image", "label"
  dtype @1 :Text;       # "uint8", "float32", ...
  shape @2 :List(Int64);  # per sample (no batch dimension)
}

struct DatasetInfo {
  spec @0 :DatasetSpec;
  count @1 :UInt64;     # samples
  tensors @2 :List(TensorSpec);
  files @3 :List(Text); # the files the dataset reads
  fingerprint @4 :UInt64;  # sample count, tensors and an index digest; 0: not known
  ownerUid @5 :UInt32 = 0xffffffff;  # who registered it; 0xffffffff: not known
}

# What one rank reads (Daemon.openStream). The ring (slots x slot size, the slot size
# following from batchSize and the dataset's tensors) must fit in what is left of the
# daemon's shared-memory budget (config shm_budget, 4 GiB by default): resource_exhausted
# otherwise, with the numbers.
struct StreamRequest {
  job @0 :Text;         # shared by all ranks of one training run; not empty, no length limit yet
  dataset @1 :Text;
  batchSize @2 :UInt32;   # 1..1048576 samples
  seed @3 :UInt64;
  rank @4 :UInt32;        # below worldSize
  worldSize @5 :UInt32;   # at least 1; no upper limit yet
  epochs @6 :UInt32;    # 0: until the stream is closed
  shuffle @7 :Bool = true;
  slots @8 :UInt32;     # ring depth, 2..1024; 0: the daemon's default (config ring_slots, 8)
  startEpoch @9 :UInt32;  # resume from this epoch; below epochs unless epochs is 0
  startPosition @10 :UInt64;  # resume startEpoch at this position of its order (a Loader
                              # state's); below the dataset's sample count
  fingerprint @11 :UInt64;    # the dataset's fingerprint the caller expects (a saved Loader
                              # state's); 0: any. failed_precondition naming both if unlike
  sampleIds @12 :Bool;        # add a "sample_id" int64 tensor (each sample's index) to batches
  coordinator @13 :Text;      # HOST:PORT of the daemon that coordinates the job (its
                              # `listen` endpoint); empty: this daemon
  # The rank opens its stream again after losing its daemon (it restarted): its trainer
  # already received batches 0 .. rejoinReceived-1 of epoch rejoinEpoch (and the epochs
  # before it); the stream continues after them. Same job params as the first open.
  rejoin @14 :Bool;
  rejoinEpoch @15 :UInt64;
  rejoinReceived @16 :UInt64;
  # A share group: the jobs that read the same dataset with the same seed and pipeline and
  # name the same group share one producer (per uid, unless the dataset is shared), which
  # decodes each sample once for all of them; each job gets every batch of the group's
  # common order. The rows lie in a second memfd (openStream's `shared`). Empty: none.
  share @17 :Text;
}

struct StreamInfo {
  streamId @0 :UInt64;
  slotCount @1 :UInt32;
  slotSize @2 :UInt64;
  ringBytes @3 :UInt64;
  batchesPerEpoch @4 :UInt64;   # per rank
  samplesPerEpoch @5 :UInt64;   # whole dataset
  fingerprint @6 :UInt64;       # the dataset's (DatasetInfo.fingerprint)
  share @7 :Text;               # the share group (StreamRequest.share); empty: none
  # The epochs the stream serves, [startEpoch, epochs) (epochs 0: no end): as asked,
  # except for a new job that joined its share group late, which starts at the group's
  # next epoch and keeps its number of epochs (both then count the group's epochs).
  startEpoch @8 :UInt32;
  epochs @9 :UInt32;
}

# A capability whose only purpose is to carry the ring's memfd (or a share group's
# rows, openStream's `shared`) to the trainer: the server overrides
# Capability::Server::getFd(); the client calls getFd().
interface Ring {}

# The same for a shared-memory segment (see Job.openSharedMemory): getFd() yields its
# memfd, which the client duplicates and maps read-write, MAP_SHARED.
interface SharedMemory {}

# A stream lives as long as the client holds this capability (or the connection);
# dropping it, or the trainer process dying, frees the ring and returns the rank's
# uncommitted batches to the job.
interface Stream {
  close @0 ();
}

struct StreamStatus {
  streamId @0 :UInt64;
  job @1 :Text;
  rank @2 :UInt32;
  worldSize @3 :UInt32;
  dataset @4 :Text;
  epoch @5 :UInt64;
  batchesPublished @6 :UInt64;
  batchesConsumed @7 :UInt64;
  samplesPerSecond @8 :Float64;
  ringFill @9 :Float64;         # fraction of slots holding unread batches
  slotCount @10 :UInt32;
  samplesSkipped @11 :UInt64;   # corrupt samples dropped (dataset on_error: skip)
  # Over the stream's life: samples and payload bytes published, samples that failed to
  # read or decode, seconds the trainer waited for a batch not ready (its SDK's account).
  samplesPublished @12 :UInt64;
  bytesPublished @13 :UInt64;
  decodeErrors @14 :UInt64;
  dataStallSeconds @15 :Float64;
  # The ring's prefetch depth now, and the slots it has ever written (the rest of the
  # ring's memory was never touched).
  prefetchDepth @16 :UInt32;
  slotsTouched @17 :UInt32;
  share @18 :Text;              # the share group it reads (StreamRequest.share); empty: none
  sharedBatches @19 :UInt64;    # batches served from the group's rows, not decoded for it
  remoteRows @20 :UInt64;       # rows remote decode workers decoded for it
}

# A remote decode worker of the node (config decode_workers): another node's emberd that
# decodes parts of this node's streams' batches. Counters over the daemon's life.
struct DecodeWorkerStatus {
  address @0 :Text;             # HOST:PORT
  up @1 :Bool;                  # false: left out after a failed call until its retry
  lastError @2 :Text;           # why its last failed call failed; empty: none failed
  calls @3 :UInt64;
  rows @4 :UInt64;              # decoded by it and written into slots
  bytes @5 :UInt64;             # of those rows
  failedCalls @6 :UInt64;       # their rows were decoded on this node instead
  rowsPerSecond @7 :Float64;    # its measured rate
  share @8 :Float64;            # of all rows the node's streams decoded (here and remotely)
}

struct JobStatus {
  job @0 :Text;
  worldSize @1 :UInt32;
  dataset @2 :Text;
  epochsStarted @3 :UInt64;
  batchesLeased @4 :UInt64;
  batchesCommitted @5 :UInt64;
  batchSize @6 :UInt32;
  batchesPerRank @7 :UInt64;    # in a full epoch
  ranks @8 :List(RankProgress);
  # Empty: this daemon coordinates the job. Else the HOST:PORT of the daemon that does,
  # and `ranks` lists only this node's ranks (their progress as this daemon saw it).
  coordinator @9 :Text;
  leasesInFlight @10 :UInt64;   # batches leased and not yet consumed, every rank and epoch
  # `ranks` lists at most 1024 ranks, the lowest numbered; these count them all.
  ranksUnlisted @11 :UInt32;    # ranks beyond those listed
  ranksJoined @12 :UInt32;      # joined now, listed or not
}

# Where one rank of a job stands.
struct RankProgress {
  rank @0 :UInt32;
  joined @1 :Bool;
  epoch @2 :UInt64;       # its first epoch not fully consumed
  consumed @3 :UInt64;    # batches of that epoch consumed in a row from its first
  leased @4 :UInt64;      # batches handed to it, not yet consumed
  node @5 :Text;          # the node whose daemon it joined through; empty: this daemon
}

# A shared-memory segment that not all of its ranks have opened yet.
struct PendingSegment {
  job @0 :Text;
  name @1 :Text;        # the segment's name (Job.openSharedMemory's `segment`)
  worldSize @2 :UInt32;
  bytes @3 :UInt64;
  missingRanks @4 :List(UInt32);  # ascending, at most 1024
  ageSeconds @5 :Float64;
  missingUnlisted @6 :UInt32;     # missing ranks beyond those listed
}

struct DaemonStatus {
  version @0 :Text;
  pid @1 :UInt32;
  uptimeSeconds @2 :Float64;
  datasets @3 :List(DatasetInfo);
  jobs @4 :List(JobStatus);
  streams @5 :List(StreamStatus);
  shmBytesInUse @6 :UInt64;
  shmBytesBudget @7 :UInt64;
  pendingSegments @8 :List(PendingSegment);
  # The daemon process's open descriptors and resident memory; 0 where /proc is unreadable.
  openFds @9 :UInt64;
  residentBytes @10 :UInt64;
  # The node's remote decode workers, in config order (shown to every caller).
  decodeWorkers @11 :List(DecodeWorkerStatus);
}

# How far a registration in progress has got (Daemon.registrationProgress).
struct RegistrationProgress {
  dataset @0 :Text;
  shardsDone @1 :UInt64;
  shardsTotal @2 :UInt64;     # 0: not listed yet, or a format without shards
  bytesDone @3 :UInt64;       # the sizes of the shards indexed
  elapsedSeconds @4 :Float64;
}

# A dataset with what it costs the node (Daemon.datasetDetails).
struct DatasetDetails {
  info @0 :DatasetInfo;
  source @1 :Text;            # spec.path; a URL without user, password or query
  shards @2 :UInt64;          # 0: a format without shards, or not known
  indexBytes @3 :UInt64;      # held in emberd's memory, charged to the owner; 0: none/unknown
  remote @4 :Bool;            # its shards are read through the node's shard cache
  shardsCached @5 :UInt64;
  bytesCached @6 :UInt64;
}

struct ShardCacheEntry {
  url @0 :Text;               # without user, password or query
  dataset @1 :Text;           # a dataset of the caller's (or shared) reading it; empty: none
  bytes @2 :UInt64;
  inUse @3 :Bool;             # held by a reader: neither evicted nor cleared now
}

# The node's shard cache: its totals and counters, and the entries of the datasets the
# caller may read (all for root and emberd's user), at most 10000 (the rest counted).
struct ShardCacheStatus {
  limitBytes @0 :UInt64;
  bytes @1 :UInt64;
  entries @2 :UInt64;
  hits @3 :UInt64;
  misses @4 :UInt64;
  fetchedBytes @5 :UInt64;
  evictions @6 :UInt64;
  damaged @7 :UInt64;
  rangeReads @8 :UInt64;
  rangeBytes @9 :UInt64;
  listed @10 :List(ShardCacheEntry);
  entriesUnlisted @11 :UInt64;
  bytesUnlisted @12 :UInt64;
}

struct ShardCacheCleared {
  entries @0 :UInt64;
  bytes @1 :UInt64;
  inUse @2 :UInt64;           # entries kept: a reader holds them
}

# The bootstrap capability of a connection to emberd's unix socket.
#
# Limits of the connection: one message (a call or its results) holds at most 64 MiB
# (Cap'n Proto's default traversal limit of 8 Mi words, which emberd keeps) and at most 4
# file descriptors. Key-value sizes have their own limits (Job); key lists and dataset
# lists have none yet beyond that.
#
# What a connection holds (its streams, its jobs) is released when the client drops the
# capability or the connection ends, also when the client process dies.
#
# Users: emberd knows a connection's user from the kernel (SO_PEERCRED, SO_PEERGROUPS).
# Datasets and jobs belong to the user who registered or started them; other users
# neither see them (listDatasets, status) nor remove, stream, join, read or write them:
# permission_denied naming the dataset or job and its owner's uid. A shared dataset
# (DatasetSpec.shared) may be streamed and inspected by all. root, emberd's own uid and
# (config share_group) members of one group among themselves are exempt. addDataset reads
# the files with the caller's rights: permission_denied naming the file the caller
# could not read (symlinks resolved and checked the same way).
interface Daemon {
  # Catalog. addDataset reads the dataset's files (on a separate thread: other calls are
  # not held up); already_exists if the caller already has a dataset of that name, or,
  # registering a shared one, if a shared one has it: each uid names its unshared
  # datasets in a namespace of its own. inspectDataset and removeDataset: not_found if
  # no dataset of that name is the caller's or shared.
  addDataset @0 (spec :DatasetSpec) -> (info :DatasetInfo);
  listDatasets @1 () -> (datasets :List(DatasetInfo));
  inspectDataset @2 (dataset :Text) -> (info :DatasetInfo);
  removeDataset @3 (dataset :Text) -> ();

  # A rank's stream (see StreamRequest for the limits). invalid_argument naming the field,
  # not_found for an unknown dataset, resource_exhausted when the ring does not fit.
  # `shared` carries the memfd of the share group's rows (the ring's shared regions lie
  # in it; the client maps them read-only); null when the stream reads no group.
  openStream @4 (request :StreamRequest)
      -> (stream :Stream, ring :Ring, info :StreamInfo, shared :Ring);

  status @5 () -> (status :DaemonStatus);

  # Joins `job` (not empty; no length limit yet) on this node: the returned capability is
  # the job's key-value store, barriers and shared-memory segments. A job's keys and
  # barriers live as long as some client holds a Job capability for it: when the last one
  # is released (or its connection ends), they are dropped, so a later run can reuse the
  # job's name. invalid_argument: empty job.
  # `coordinator`: HOST:PORT of the daemon that coordinates the job when it spans nodes
  # (empty: this daemon). This daemon then hands out that daemon's store and barriers for
  # the job (shared by every node's ranks); openSharedMemory on it fails, segments being
  # node-local. unavailable when that daemon cannot be reached.
  joinJob @6 (job :Text, coordinator :Text) -> (job :Job);

  # How far the caller's registration of `dataset` (an addDataset in flight, e.g. on
  # another connection) has got. Only the uid that registers it sees it; not_found when
  # none is in progress (not yet taken, or over). The daemon follows at most 64
  # registrations at a time (others run unfollowed: not_found).
  registrationProgress @7 (dataset :Text) -> (progress :RegistrationProgress);

  # inspectDataset's dataset with its source, shards, index memory and what the node's
  # shard cache holds of it; not_found as inspectDataset.
  datasetDetails @8 (dataset :Text) -> (details :DatasetDetails);

  # The node's shard cache (see ShardCacheStatus); failed_precondition if the daemon has none.
  shardCache @9 () -> (cache :ShardCacheStatus);
  # Removes every cache entry no reader holds. The cache is the node's: only root and
  # emberd's own user may (permission_denied otherwise).
  clearShardCache @10 () -> (cleared :ShardCacheCleared);
}

# Membership in a job, from Daemon.joinJob; used to bootstrap Gloo / NCCL through the daemon
# and to synchronize the job's ranks on this node.
#
# Waits (kvGet, barrier) take timeoutMs: how long to wait, at most 2^32 - 1 ms (about 49
# days); deadline_exceeded naming the key or barrier and the timeout when it passes.
# timeoutMs = 0 does not wait: kvGet returns a key that is already there and fails
# otherwise; a barrier arrival completes only if it is the round's last.
interface Job {
  # The key-value store. Per job at most 16384 keys of up to 1 KiB, values of up to 1 MiB,
  # 16 MiB of keys and values in all, and 4096 waits (kvGet, barrier) pending:
  # resource_exhausted past them, naming the limit.
  kvSet @0 (key :Text, value :Data) -> ();
  # Waits for the key to be set (kvSet or kvAdd).
  kvGet @1 (key :Text, timeoutMs :UInt32) -> (value :Data);
  # The value as a decimal int64 (missing: 0) plus delta, stored and returned.
  # invalid_argument if the value is not an integer or the sum overflows.
  kvAdd @2 (key :Text, delta :Int64) -> (value :Int64);
  # Whether all of `keys` exist.
  kvCheck @3 (keys :List(Text)) -> (present :Bool);
  kvDelete @4 (key :Text) -> (deleted :Bool);

  # Returns once worldSize callers have reached `barrier` (the round then resets, so a
  # barrier can be reused). invalid_argument: worldSize 0 or unlike the current round's.
  # Waiting arrivals count against the job's 4096 pending waits; names up to 1 KiB, and
  # 1024 barrier names a job.
  # Rounds are numbered from 1 per barrier name; the answer says which one completed.
  # `round` 0 arrives at the round now open; round N (a caller that saw round N - 1
  # complete) returns at once if round N already completed (its answer was lost, e.g. to a
  # coordinator restart), and tells a coordinator that lost its state (a restart) that
  # the rounds before N completed, so that members who re-send their arrival after a
  # restart meet again. `member` (a random id per client; 0: none) replaces the member's
  # earlier arrival in the open round rather than counting twice (one re-sent over a new
  # connection before the old one's end was noticed).
  barrier @5 (barrier :Text, worldSize :UInt32, timeoutMs :UInt32, round :UInt64,
              member :UInt64) -> (round :UInt64);

  # A zero-filled shared-memory segment (a memfd, sealed against resizing only) that the
  # worldSize ranks of the job on this node share, e.g. for an all-reduce in shared
  # memory. Each rank calls once: the first call for `segment` creates a segment of
  # `bytes`, the next worldSize - 1 calls get the same one; then the daemon forgets it (the
  # memory lives as long as the ranks' descriptors and mappings) and a later call creates
  # a new one. A segment that fewer than worldSize ranks opened is dropped 10 minutes after
  # its creation. Does not wait for the other ranks.
  # invalid_argument: empty segment, worldSize 0, rank not below worldSize, bytes 0 or
  # over 1 GiB, or worldSize / bytes unlike the first call's (the message names both);
  # resource_exhausted: 1024 segments are already waiting for their ranks.
  # No length limit yet on `segment`.
  openSharedMemory @6 (segment :Text, worldSize :UInt32, bytes :UInt64, rank :UInt32)
      -> (memory :SharedMemory);

  # The coordinating daemon's incarnation: a random id drawn when it started. A member
  # that joins again and finds another one knows the coordinator restarted and lost the
  # job's keys and barriers (it then sets again what it had set).
  incarnation @7 () -> (id :UInt64);
}
