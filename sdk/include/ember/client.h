// ember::Client: a trainer's (or emberctl's) connection to the local emberd.
//
// Connects over the daemon's unix socket (ClientOptions::socket_path, else the
// EMBER_SOCKET environment variable, else /run/ember/emberd.sock) and speaks Cap'n Proto
// RPC on a private thread, so every method here is thread-safe and blocking: call it
// from the training loop, from Gloo's threads, from anywhere.
// Errors come back as Status with the daemon's message, e.g.
//   not_found: dataset 'fmnist' is not registered
//   unavailable: cannot connect to emberd at /run/ember/emberd.sock: No such file or directory
#ifndef EMBER_CLIENT_H_
#define EMBER_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ember/daemon_status.h"  // DatasetSpec, DatasetInfo, DaemonStatus, ...
#include "ember/status.h"
#include "ember/stream_reader.h"

namespace ember {

struct ClientOptions {
  std::string socket_path;  // empty: $EMBER_SOCKET, else kDefaultSocket
  std::chrono::milliseconds connect_timeout{5000};
  // Each call's answer, at most; past it the call fails with kDeadlineExceeded. 0: no
  // limit (the default: a call that waits, such as KvGet or a barrier, has its own
  // timeout; a stream's batches come through its ring).
  std::chrono::milliseconds call_timeout{0};
  // How long a store call that does not wait (KvSet, KvAdd, KvCheck, KvDelete) goes on
  // joining again after the link to the daemon or to the job's coordinator is lost (a
  // restart), before it fails kUnavailable; KvGet and Barrier retry within their own
  // timeout. 0: fail at once.
  std::chrono::milliseconds rejoin_timeout{30000};
  // With no socket_path and no $EMBER_SOCKET, when no daemon answers on kDefaultSocket:
  // true starts the user's private daemon if none runs (sdk/src/private_daemon.h); false
  // connects to it only if it runs (a status tool: look, start nothing).
  bool start_private_daemon = true;
};

inline constexpr const char* kDefaultSocket = "/run/ember/emberd.sock";

// What a rank reads: a (job, rank) stream of batches of `dataset`.
struct StreamOptions {
  std::string job;        // shared by all ranks of a run (EMBER_JOB under ember-run)
  std::string dataset;
  uint32_t batch_size = 64;
  uint64_t seed = 0;
  uint32_t rank = 0;
  uint32_t world_size = 1;
  uint32_t epochs = 1;    // 0: until the reader is destroyed
  bool shuffle = true;
  uint32_t slots = 0;     // ring depth; 0: the daemon's default
  uint32_t start_epoch = 0;
  uint64_t start_position = 0;  // of start_epoch's order: resume mid-epoch (LoaderState)
  uint64_t fingerprint = 0;     // the dataset's fingerprint expected; 0: any
  bool sample_ids = false;      // add a "sample_id" int64 tensor (dataset index) to batches
  // HOST:PORT of the daemon that coordinates the job (its `listen` endpoint), when the
  // job spans nodes; empty: $EMBER_COORDINATOR (set by ember-run --coordinator), else the
  // local daemon.
  std::string coordinator;
  // Opening again after losing the daemon (ember::Loader does it): the trainer already
  // received batches [0, rejoin_received) of rejoin_epoch and the epochs before it.
  bool rejoin = false;
  uint64_t rejoin_epoch = 0;
  uint64_t rejoin_received = 0;
  // A share group's name; empty: none. The jobs that read the same dataset with the same
  // seed and name the same group share one producer: each sample is decoded once for all
  // of them, and each job gets every batch of the group's common order (its batches' rows
  // lie in the group's memory, mapped read-only: the tensors must not be written).
  std::string share;
};

class Client {
 public:
  // kUnavailable (naming the socket) if the daemon cannot be reached in time.
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& socket_path() const;

  // False once the connection to the daemon is lost; every call then fails kUnavailable.
  bool connected() const;

  // Connects again to the same socket (a daemon restarted by systemd), waiting up to
  // `timeout`; on success the client is connected again, and readers and streams of the
  // old connection stay dead (store calls join their jobs again by themselves).
  // kUnavailable as Connect. Calls running meanwhile finish on the old connection.
  Status Reconnect(std::chrono::milliseconds timeout);

  // Catalog.
  Result<DatasetInfo> AddDataset(const DatasetSpec& spec);
  Result<std::vector<DatasetInfo>> ListDatasets();
  Result<DatasetInfo> InspectDataset(const std::string& name);
  Status RemoveDataset(const std::string& name);
  // How far this user's registration of dataset `name` (an AddDataset running now, e.g. on
  // another thread of this client) has got; kNotFound when none is in progress (not
  // begun yet, or over).
  Result<RegistrationProgress> GetRegistrationProgress(const std::string& name);
  // InspectDataset's dataset with its source (credentials removed), shards, index memory
  // and what the node's shard cache holds of it.
  Result<DatasetDetails> DescribeDataset(const std::string& name);

  Result<DaemonStatus> GetStatus();

  // The node's shard cache: its totals and counters, and the entries of the datasets this
  // user may read (every entry for root and emberd's own user).
  Result<ShardCacheStatus> GetShardCache();
  // Removes the shard cache's entries no reader holds: kPermissionDenied unless this user
  // is root or emberd's own (the cache is the node's).
  Result<ShardCacheCleared> ClearShardCache();

  // Opens this rank's stream and maps its ring. The stream lives as long as the returned
  // reader (and at most as long as this client).
  Result<std::unique_ptr<StreamReader>> OpenStream(const StreamOptions& options);

  // Coordinator store, scoped by job. The store is the local daemon's, or, when
  // $EMBER_COORDINATOR names the daemon coordinating a job that spans nodes, that daemon's
  // (through the local one). The client joins each job once, on its first use here, and
  // holds that membership until it is destroyed; the daemon drops a job's keys and
  // barriers when no client holds a membership of it any more.
  // A lost link (the local daemon or the job's coordinator restarted) does not end a
  // call: it joins the job again, reconnecting to the daemon if need be, and retries
  // (see ClientOptions::rejoin_timeout). Having joined a coordinator that restarted, it
  // first sets again what this client had set: each key's last value it set, or the sum
  // of its KvAdd deltas since. A barrier arrival is re-sent with the round it was in, so
  // members meet again after a restart. Errors name the link that failed, e.g.
  //   unavailable: emberd at /run/ember/emberd.sock lost its connection to the job's
  //   coordinator 10.0.0.1:7100: Peer disconnected
  // KvGet waits up to `timeout` for the key to appear (kDeadlineExceeded naming the key
  // after that); a timeout of 0 (or less) does not wait, one over 2^32 - 1 ms is capped.
  Status KvSet(const std::string& job, const std::string& key, const std::string& value);
  Result<std::string> KvGet(const std::string& job, const std::string& key,
                            std::chrono::milliseconds timeout);
  Result<int64_t> KvAdd(const std::string& job, const std::string& key, int64_t delta);
  Result<bool> KvCheck(const std::string& job, const std::vector<std::string>& keys);
  Result<bool> KvDelete(const std::string& job, const std::string& key);

  // Returns once `world_size` callers have reached barrier `name` of `job`; waits as KvGet.
  // Each client is one participant (it numbers the rounds it passed).
  Status Barrier(const std::string& job, const std::string& name, uint32_t world_size,
                 std::chrono::milliseconds timeout);

  // A shared-memory segment for the `world_size` ranks of `job` on this node (e.g. for
  // an all-reduce in shared memory): a descriptor of `bytes` bytes of zero-filled memory
  // (a memfd, sealed against resizing only) to mmap read-write, MAP_SHARED. The caller
  // owns the descriptor (O_CLOEXEC) and must close it; the memory lives until every rank
  // has closed and unmapped it.
  // For `rank` of the job's `world_size` ranks. The first call for (job, name) creates
  // the segment and the other ranks get the same one (a rank that asks again meanwhile
  // gets it again); once every rank has it, the daemon forgets it and a later call
  // creates a new one. A segment that fewer than world_size ranks opened within 10
  // minutes of its creation is dropped (later calls get a new one). Does not wait for
  // the other ranks: synchronize through the memory, or Barrier, before relying on them.
  // kInvalidArgument: empty job or name, world_size 0, rank not below world_size, bytes 0
  // or over 1 GiB, or world_size / bytes unlike the first call's (the message names both);
  // kResourceExhausted: too many segments are waiting for their ranks.
  Result<int> OpenSharedMemory(const std::string& job, const std::string& name, uint32_t rank,
                               uint32_t world_size, uint64_t bytes);

  class Impl;  // in sdk/src; holds the RPC thread
  struct JobMemory;  // in sdk/src: what this client set and passed in each job

 private:
  Client(std::shared_ptr<Impl> impl, std::chrono::milliseconds rejoin_timeout);
  // The connection now (Reconnect replaces it; a call holds the one it started on).
  std::shared_ptr<Impl> impl() const;
  // Runs `attempt` (given the time left: all of `timeout` the first time) until it
  // succeeds, fails other than kUnavailable, or `timeout` has passed; between tries it
  // reconnects to the daemon or drops the client's membership of `job` (a lost
  // coordinator link), so that the next try joins again.
  Status RetryJob(const std::string& job, std::chrono::milliseconds timeout,
                  const std::function<Status(Impl& impl, std::chrono::milliseconds left)>& attempt);

  const std::string socket_path_;
  mutable std::mutex impl_mu_;
  std::shared_ptr<Impl> impl_;  // guarded by impl_mu_
  const std::chrono::milliseconds rejoin_timeout_;
  std::shared_ptr<JobMemory> memory_;
};

}  // namespace ember

#endif  // EMBER_CLIENT_H_
