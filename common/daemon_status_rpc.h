// The one conversion of each ember/daemon_status.h struct to and from its Cap'n Proto
// counterpart (schemas/ember.capnp), for the RPC adapters on both sides: emberd's
// DaemonServer writes with ToRpc, the SDK's Client reads with FromRpc.
//
// ToRpc sets every field of the builder (lists initialized to the vector's size); FromRpc
// reads every field of the reader. A DatasetSpec read with an empty onError gets "fail"
// (the schema's default when empty). Neither throws beyond what Cap'n Proto's accessors
// throw for a malformed message.
#ifndef EMBER_COMMON_DAEMON_STATUS_RPC_H_
#define EMBER_COMMON_DAEMON_STATUS_RPC_H_

#include <cstddef>
#include <vector>

#include "ember/daemon_status.h"
#include "schemas/ember.capnp.h"

namespace ember::daemon_status_rpc {

void ToRpc(const DatasetSpec& spec, rpc::DatasetSpec::Builder out);
DatasetSpec FromRpc(rpc::DatasetSpec::Reader in);

void ToRpc(const TensorInfo& tensor, rpc::TensorSpec::Builder out);
TensorInfo FromRpc(rpc::TensorSpec::Reader in);

void ToRpc(const DatasetInfo& info, rpc::DatasetInfo::Builder out);
DatasetInfo FromRpc(rpc::DatasetInfo::Reader in);

void ToRpc(const StreamStatus& stream, rpc::StreamStatus::Builder out);
StreamStatus FromRpc(rpc::StreamStatus::Reader in);

void ToRpc(const DecodeWorkerStatus& worker, rpc::DecodeWorkerStatus::Builder out);
DecodeWorkerStatus FromRpc(rpc::DecodeWorkerStatus::Reader in);

void ToRpc(const RankProgress& rank, rpc::RankProgress::Builder out);
RankProgress FromRpc(rpc::RankProgress::Reader in);

void ToRpc(const JobStatus& job, rpc::JobStatus::Builder out);
JobStatus FromRpc(rpc::JobStatus::Reader in);

void ToRpc(const PendingSegmentStatus& segment, rpc::PendingSegment::Builder out);
PendingSegmentStatus FromRpc(rpc::PendingSegment::Reader in);

void ToRpc(const DaemonStatus& status, rpc::DaemonStatus::Builder out);
DaemonStatus FromRpc(rpc::DaemonStatus::Reader in);

void ToRpc(const RegistrationProgress& progress, rpc::RegistrationProgress::Builder out);
RegistrationProgress FromRpc(rpc::RegistrationProgress::Reader in);

void ToRpc(const DatasetDetails& details, rpc::DatasetDetails::Builder out);
DatasetDetails FromRpc(rpc::DatasetDetails::Reader in);

void ToRpc(const ShardCacheEntry& entry, rpc::ShardCacheEntry::Builder out);
ShardCacheEntry FromRpc(rpc::ShardCacheEntry::Reader in);

void ToRpc(const ShardCacheStatus& cache, rpc::ShardCacheStatus::Builder out);
ShardCacheStatus FromRpc(rpc::ShardCacheStatus::Reader in);

void ToRpc(const ShardCacheCleared& cleared, rpc::ShardCacheCleared::Builder out);
ShardCacheCleared FromRpc(rpc::ShardCacheCleared::Reader in);

// Each item of `items` into the list `out` of a List(...) field initialized to
// items.size() (e.g. by ToRpcList(all, results.initDatasets(all.size()))).
template <typename T, typename ListBuilder>
void ToRpcList(const std::vector<T>& items, ListBuilder out) {
  for (size_t i = 0; i < items.size(); ++i) ToRpc(items[i], out[i]);
}

// Every item of the list `in`, read with FromRpc.
template <typename ListReader>
auto FromRpcList(ListReader in) -> std::vector<decltype(FromRpc(in[0]))> {
  std::vector<decltype(FromRpc(in[0]))> out;
  out.reserve(in.size());
  for (auto item : in) out.push_back(FromRpc(item));
  return out;
}

}  // namespace ember::daemon_status_rpc

#endif  // EMBER_COMMON_DAEMON_STATUS_RPC_H_
