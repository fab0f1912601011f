#include "daemon/rpc/peer_convert.h"

namespace ember::daemon::peer_wire {

void ToRpc(const JobParams& p, rpc::JobParams::Builder b) {
  b.setDataset(p.dataset);
  b.setNumSamples(p.num_samples);
  b.setBatchSize(p.batch_size);
  b.setWorldSize(p.world_size);
  b.setSeed(p.seed);
  b.setShuffle(p.shuffle);
  b.setStartEpoch(p.start_epoch);
  b.setStartPosition(p.start_position);
  b.setFingerprint(p.fingerprint);
  b.setOwnerUid(p.owner.uid);
  b.setOwnerTeam(p.owner.team);
  b.setOwnerPrivileged(p.owner.privileged);
  b.setShuffleDigest(p.shuffle_shape.digest);
  b.setShuffleWindow(p.shuffle_shape.window);
}

JobParams FromRpc(rpc::JobParams::Reader r) {
  JobParams p;
  p.dataset = r.getDataset();
  p.num_samples = r.getNumSamples();
  p.batch_size = r.getBatchSize();
  p.world_size = r.getWorldSize();
  p.seed = r.getSeed();
  p.shuffle = r.getShuffle();
  p.start_epoch = r.getStartEpoch();
  p.start_position = r.getStartPosition();
  p.fingerprint = r.getFingerprint();
  p.owner.uid = r.getOwnerUid();
  p.owner.team = r.getOwnerTeam();
  p.owner.privileged = r.getOwnerPrivileged();
  p.shuffle_shape.digest = r.getShuffleDigest();
  p.shuffle_shape.window = r.getShuffleWindow();
  return p;
}

void ToRpc(const BatchLease& lease, rpc::BatchLease::Builder b) {
  b.setEpoch(lease.epoch);
  b.setBatch(lease.batch);
  b.setLastInEpoch(lease.last_in_epoch);
  b.setStepEnd(lease.step_end);
  b.setStepBegin(lease.step_begin);
  b.setBegin(lease.positions.begin);
  b.setEnd(lease.positions.end);
}

BatchLease FromRpc(rpc::BatchLease::Reader r) {
  BatchLease lease;
  lease.epoch = r.getEpoch();
  lease.batch = r.getBatch();
  lease.index_in_epoch = lease.batch;
  lease.last_in_epoch = r.getLastInEpoch();
  lease.step_end = r.getStepEnd();
  lease.step_begin = r.getStepBegin();
  lease.positions = {r.getBegin(), r.getEnd()};
  return lease;
}

void ToRpc(const HeldBatch& h, rpc::HeldBatch::Builder b) {
  b.setEpoch(h.epoch);
  b.setBatch(h.batch);
  b.setConsumed(h.consumed);
}

HeldBatch FromRpc(rpc::HeldBatch::Reader r) {
  return {r.getEpoch(), r.getBatch(), r.getConsumed()};
}

void ToRpc(const RankBatch& c, rpc::RankBatch::Builder b) {
  b.setRank(c.rank);
  b.setEpoch(c.epoch);
  b.setBatch(c.batch);
}

RankBatch FromRpc(rpc::RankBatch::Reader r) { return {r.getRank(), r.getEpoch(), r.getBatch()}; }

void ToRpc(const RankWant& w, rpc::RankWant::Builder b) {
  b.setRank(w.rank);
  b.setEpoch(w.epoch);
}

RankWant FromRpc(rpc::RankWant::Reader r) { return {r.getRank(), r.getEpoch()}; }

void ToRpc(const Principal& p, rpc::Principal::Builder b) {
  b.setUid(p.uid);
  b.setTeam(p.team);
  b.setPrivileged(p.privileged);
}

Principal FromRpc(rpc::Principal::Reader r) {
  Principal p;
  p.uid = r.getUid();
  p.team = r.getTeam();
  p.privileged = r.getPrivileged();
  return p;
}

void ToRpc(const DecodeRequest& request, rpc::DecodeRequest::Builder b) {
  b.setDataset(request.dataset);
  b.setFingerprint(request.fingerprint);
  b.setSeed(request.seed);
  b.setEpoch(request.epoch);
  auto ids = b.initIds(static_cast<unsigned>(request.ids.size()));
  for (unsigned i = 0; i < request.ids.size(); ++i) ids.set(i, request.ids[i]);
  ToRpc(request.caller, b.initCaller());
}

DecodeRequest FromRpc(rpc::DecodeRequest::Reader r) {
  DecodeRequest request;
  request.dataset = r.getDataset();
  request.fingerprint = r.getFingerprint();
  request.seed = r.getSeed();
  request.epoch = r.getEpoch();
  const auto ids = r.getIds();
  request.ids.reserve(ids.size());
  for (uint64_t id : ids) request.ids.push_back(id);
  request.caller = r.hasCaller() ? FromRpc(r.getCaller()) : Principal{};
  return request;
}

}  // namespace ember::daemon::peer_wire
