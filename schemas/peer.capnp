# Daemon to daemon: the RPC interface emberd serves on its TCP endpoint (config key
# `listen`) to other nodes' daemons, over mutual TLS (daemon/peer). Trainers and emberctl
# never use it; they talk to their local daemon (ember.capnp).
#
# Errors travel as Cap'n Proto exceptions whose description starts with
# "<status code name>: " (see ember/status.h) followed by the message.

@0x884d993e931f0a7f;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("ember::rpc");

using Ember = import "/schemas/ember.capnp";

# The bootstrap capability of every daemon-to-daemon connection.
interface Peer {
  # The first call on a connection: each side names its node (config key `node`) and the
  # protocol version it speaks (1). A version other than the server's fails with
  # failed_precondition naming both versions.
  hello @0 (node :Text, protocol :UInt32) -> (node :Text, protocol :UInt32);

  # Joins `rank` of `job`, a job this daemon coordinates, for a rank of node `node` (the
  # calling daemon's node name, for messages). The first rank of a job sets its params;
  # later ones must match them (invalid_argument naming the field, both values and the
  # node). The returned capability is the rank's membership: releasing it (or the
  # connection ending) leaves the job, and its uncommitted leases are dropped.
  # `held`: when a node joins its rank again after losing this daemon (it restarted), the
  # batches the rank's stream consumed or still holds, so that the rank continues where it
  # stands and nothing it read is served again.
  joinJob @1 (job :Text, rank :UInt32, params :JobParams, node :Text, held :List(HeldBatch))
      -> (coordination :Coordination);

  # The key-value store and barriers of `job` (Ember.Job, the same as a local trainer's
  # joinJob gives), for the ranks of node `node`: a daemon hands this capability to its
  # local ranks of a job that this daemon coordinates, so every rank of every node shares
  # one store. Shared-memory segments are node-local: openSharedMemory on it fails
  # (failed_precondition).
  openJob @2 (job :Text, node :Text) -> (job :Ember.Job);
}

# A job's params, as the coordinating daemon's ledger keeps them.
struct JobParams {
  dataset @0 :Text;
  numSamples @1 :UInt64;
  batchSize @2 :UInt32;
  worldSize @3 :UInt32;
  seed @4 :UInt64;
  shuffle @5 :Bool;
  startEpoch @6 :UInt64;
  startPosition @7 :UInt64;
  fingerprint @8 :UInt64;   # the dataset copy's on the calling node; 0: not checked
}

struct HeldBatch {
  epoch @0 :UInt64;
  batch @1 :UInt64;
  consumed @2 :Bool;   # else leased: in the stream's ring, not yet read
}

# One rank's batch of one global step (daemon/coordinator/job_ledger.h, BatchLease).
struct BatchLease {
  epoch @0 :UInt64;
  batch @1 :UInt64;          # the global step
  lastInEpoch @2 :Bool;
  stepEnd @3 :UInt64;        # the epoch's position after this step
  sampleIds @4 :List(UInt64);
}

# One rank's part in a job coordinated by the serving daemon (Peer.joinJob).
interface Coordination {
  # The rank's next batch of `epoch`: failed_precondition once it received all of them.
  next @0 (epoch :UInt64) -> (lease :BatchLease);
  # The rank's trainer consumed the batch. not_found if the rank holds no such lease.
  commit @1 (epoch :UInt64, batch :UInt64) -> ();
}
