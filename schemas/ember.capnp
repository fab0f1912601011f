# Ember's control path: the RPC interface emberd serves on its unix socket.
# The data path (batches) never crosses RPC; it goes through shared-memory rings whose
# layout is common/include/ember/ring_layout.h.
#
# Errors travel as Cap'n Proto exceptions whose description starts with
# "<status code name>: " (see ember/status.h) followed by the message.

@0xdb126e7b5ef1749e;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("ember::rpc");

struct DatasetSpec {
  name @0 :Text;
  format @1 :Text;      # "idx"
  path @2 :Text;        # a directory, or for idx an images file
  split @3 :Text;       # "train" or "test"
  pipeline @4 :Text;    # YAML text of the decode/transform pipeline; empty: format default
  onError @5 :Text;     # "fail" (default when empty) or "skip"
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
}

struct StreamRequest {
  job @0 :Text;         # shared by all ranks of one training run
  dataset @1 :Text;
  batchSize @2 :UInt32;
  seed @3 :UInt64;
  rank @4 :UInt32;
  worldSize @5 :UInt32;
  epochs @6 :UInt32;    # 0: until the stream is closed
  shuffle @7 :Bool = true;
  slots @8 :UInt32;     # ring depth; 0: the daemon's default
  startEpoch @9 :UInt32;  # resume from this epoch
}

struct StreamInfo {
  streamId @0 :UInt64;
  slotCount @1 :UInt32;
  slotSize @2 :UInt64;
  ringBytes @3 :UInt64;
  batchesPerEpoch @4 :UInt64;   # per rank
  samplesPerEpoch @5 :UInt64;   # whole dataset
}

# A capability whose only purpose is to carry the ring's memfd to the trainer:
# the server overrides Capability::Server::getFd(); the client calls getFd().
interface Ring {}

# The same for a shared-memory segment (see Daemon.openSharedMemory): getFd() yields its
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
}

struct JobStatus {
  job @0 :Text;
  worldSize @1 :UInt32;
  dataset @2 :Text;
  epochsStarted @3 :UInt64;
  batchesLeased @4 :UInt64;
  batchesCommitted @5 :UInt64;
}

# A shared-memory segment that not all of its ranks have opened yet.
struct PendingSegment {
  job @0 :Text;
  name @1 :Text;
  worldSize @2 :UInt32;
  bytes @3 :UInt64;
  missingRanks @4 :List(UInt32);
  ageSeconds @5 :Float64;
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
}

interface Daemon {
  # Catalog
  addDataset @0 (spec :DatasetSpec) -> (info :DatasetInfo);
  listDatasets @1 () -> (datasets :List(DatasetInfo));
  inspectDataset @2 (name :Text) -> (info :DatasetInfo);
  removeDataset @3 (name :Text) -> ();

  # Jobs and streams
  openStream @4 (request :StreamRequest) -> (stream :Stream, ring :Ring, info :StreamInfo);

  # Coordinator: a key-value store per job, used to bootstrap Gloo / NCCL, and barriers.
  kvSet @5 (job :Text, key :Text, value :Data) -> ();
  kvGet @6 (job :Text, key :Text, timeoutMs :UInt32) -> (value :Data);  # waits for the key
  kvAdd @7 (job :Text, key :Text, delta :Int64) -> (value :Int64);
  kvCheck @8 (job :Text, keys :List(Text)) -> (present :Bool);
  kvDelete @9 (job :Text, key :Text) -> (deleted :Bool);
  barrier @10 (job :Text, name :Text, worldSize :UInt32, timeoutMs :UInt32) -> ();

  # Status
  status @11 () -> (status :DaemonStatus);

  # Coordinator: a zero-filled shared-memory segment (a memfd, sealed against resizing
  # only) that the worldSize ranks of `job` on this node share, e.g. for an all-reduce in
  # shared memory. Each rank calls once: the first call for (job, name) creates a segment
  # of `bytes`, the next worldSize - 1 calls get the same one; then the daemon forgets it
  # (the memory lives as long as the ranks' descriptors and mappings) and a later call
  # creates a new one. A segment that fewer than worldSize ranks opened is dropped 10
  # minutes after its creation. invalid_argument: empty job or name, worldSize 0, bytes 0
  # or over 1 GiB, or worldSize / bytes unlike the first call's (the message names both);
  # resource_exhausted: too many segments are waiting for their ranks.
  openSharedMemory @12 (job :Text, name :Text, worldSize :UInt32, bytes :UInt64,
                        rank :UInt32) -> (memory :SharedMemory);
}
