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
  # protocol version it speaks (5). A version other than the server's fails with
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
  openJob @2 (job :Text, node :Text, caller :Principal) -> (job :Ember.Job);

  # For the calling node's ranks of `job`, all at once (so traffic, coordinator work and
  # journal records grow with nodes, not ranks): what Coordination.commit and
  # Coordination.next do for one rank, for ranks joined through this connection
  # (joinJob; a rank whose joinJob was refused gets that refusal in its entry, others
  # not_found). The commits are applied first, then the
  # wants, each in order; results[i] answers wants[i]; commitErrors holds the failed
  # commits' errors (a commit lost with a dropped connection is served again, as
  # commit's). Each list holds at most 8 entries per rank joined through the connection
  # (at least 8; else invalid_argument).
  exchange @3 (job :Text, commits :List(RankBatch), wants :List(RankWant))
      -> (results :List(RankLease), commitErrors :List(Text));
}

struct RankBatch {
  rank @0 :UInt32;
  epoch @1 :UInt64;
  batch @2 :UInt64;
}

struct RankWant {
  rank @0 :UInt32;
  epoch @1 :UInt64;
}

struct RankLease {
  rank @0 :UInt32;
  union {
    lease @1 :BatchLease;
    error @2 :Text;   # "<status code name>: <message>", as an exception's description
  }
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
  # Who runs the rank, as the calling node's daemon identified its trainer (the job's
  # first rank makes it the owner; see daemon/access/principal.h).
  ownerUid @9 :UInt32 = 0xffffffff;   # unknown
  ownerTeam @10 :Bool;
  ownerPrivileged @11 :Bool;
  # A shuffle by shards (daemon/coordinator/epoch_plan.h, ShuffleShape): the digest of the
  # dataset's blocks (each node has them); 0: over the whole set.
  shuffleDigest @12 :UInt64;
  shuffleWindow @13 :UInt32 = 1;
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
  sampleIds @4 :List(UInt64);  # protocol 2 and 3; empty since 4: see begin, end
  # The rank's slice of the step: positions [begin, end) of the epoch's order, which the
  # node computes itself (a function of the job's num_samples, seed, shuffle and epoch:
  # daemon/coordinator/epoch_orders.h), so a lease is a few words whatever the batch size.
  begin @5 :UInt64;
  end @6 :UInt64;
  stepBegin @7 :UInt64;      # the step's first position (a step shuffled by shards is
                             # grouped by shard before it is cut: epoch_plan.h)
}

# One rank's part in a job coordinated by the serving daemon (Peer.joinJob): its
# membership, and next/commit for it alone (a node's daemon batches its ranks' calls in
# Peer.exchange instead).
interface Coordination {
  # The rank's next batch of `epoch`: failed_precondition once it received all of them.
  next @0 (epoch :UInt64) -> (lease :BatchLease);
  # The rank's trainer consumed the batch. not_found if the rank holds no such lease.
  commit @1 (epoch :UInt64, batch :UInt64) -> ();
}

# Who a rank's trainer is, as the node's daemon identified it (daemon/access/principal.h):
# the coordinator lets it into a job only if it may access the job's owner.
struct Principal {
  uid @0 :UInt32 = 0xffffffff;  # unknown
  team @1 :Bool;
  privileged @2 :Bool;
}

# Remote decode workers (the caller's config decode_workers; the worker's lend_decode) do
# not use Peer: their rows go over a decode rows stream (first byte 'D' before TLS,
# daemon/peer/peer_wire.h; daemon/rpc/decode_rows.h), where the caller writes a framed
# DecodeRequest message and the worker answers each with a framed DecodeAnswer followed
# by its rowBytes bytes of rows: tensor-major (each tensor's rows back to back, as
# daemon/decode/decode_request.h's DecodedRows), a failed sample's rows zeros and listed
# in `failed`. Refusals (error set, no rows): failed_precondition when lending is off or the
# dataset's fingerprint differs, not_found for a dataset the caller may not read,
# resource_exhausted when busy.
struct DecodeRequest {
  dataset @0 :Text;
  fingerprint @1 :UInt64;   # the caller's copy's
  seed @2 :UInt64;
  epoch @3 :UInt64;
  ids @4 :List(UInt64);     # at most 1024
  caller @5 :Principal;     # the stream's owner on the calling node
}

struct DecodeAnswer {
  error @0 :Text;       # empty: decoded; else "<status code name>: <message>", no rows
  rowBytes @1 :UInt64;  # the bytes of rows that follow this message
  failed @2 :List(FailedRow);
}

struct FailedRow {
  row @0 :UInt32;    # index in the request's ids
  error @1 :Text;    # "<status code name>: <message>"
}
