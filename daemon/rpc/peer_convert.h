// The daemon-to-daemon wire's values (schemas/peer.capnp) to and from the coordinator's
// structs (daemon/coordinator/job_coordinator.h): one converter per struct, used by both
// ends (PeerServer, the Cap'n Proto coordinator channel). peer_convert_test round-trips
// each and fails for a schema field a converter leaves out.
#ifndef EMBER_DAEMON_RPC_PEER_CONVERT_H_
#define EMBER_DAEMON_RPC_PEER_CONVERT_H_

#include <vector>

#include "daemon/access/principal.h"
#include "daemon/coordinator/job_coordinator.h"
#include "daemon/decode/decode_request.h"
#include "schemas/peer.capnp.h"

namespace ember::daemon::peer_wire {

void ToRpc(const JobParams& p, rpc::JobParams::Builder b);
JobParams FromRpc(rpc::JobParams::Reader r);

// Positions only: sample ids are the receiving node's to look up (protocol 4).
void ToRpc(const BatchLease& lease, rpc::BatchLease::Builder b);
BatchLease FromRpc(rpc::BatchLease::Reader r);

void ToRpc(const HeldBatch& h, rpc::HeldBatch::Builder b);
HeldBatch FromRpc(rpc::HeldBatch::Reader r);

void ToRpc(const RankBatch& c, rpc::RankBatch::Builder b);
RankBatch FromRpc(rpc::RankBatch::Reader r);

void ToRpc(const RankWant& w, rpc::RankWant::Builder b);
RankWant FromRpc(rpc::RankWant::Reader r);

void ToRpc(const Principal& p, rpc::Principal::Builder b);
Principal FromRpc(rpc::Principal::Reader r);

// No caller on the wire: an unknown one (reading only shared datasets and those of
// unknown owners).
void ToRpc(const DecodeRequest& request, rpc::DecodeRequest::Builder b);
DecodeRequest FromRpc(rpc::DecodeRequest::Reader r);

// Lists, element by element with the converters above.
template <typename T, typename Builder>
void ToRpc(const std::vector<T>& values, Builder list) {
  for (size_t i = 0; i < values.size(); ++i) ToRpc(values[i], list[i]);
}
template <typename Reader>
auto FromRpcList(Reader list) -> std::vector<decltype(FromRpc(list[0]))> {
  std::vector<decltype(FromRpc(list[0]))> out;
  out.reserve(list.size());
  for (auto r : list) out.push_back(FromRpc(r));
  return out;
}

}  // namespace ember::daemon::peer_wire

#endif  // EMBER_DAEMON_RPC_PEER_CONVERT_H_
