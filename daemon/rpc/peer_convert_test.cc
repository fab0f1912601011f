#include "daemon/rpc/peer_convert.h"

#include <capnp/message.h>

#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include "common/wire_testing.h"

namespace ember::daemon {

// Every field of each struct, in declaration order (see common/wire_testing.h).
auto Fields(const Principal& p) {
  const auto& [uid, team, privileged] = p;
  return std::tie(uid, team, privileged);
}
auto Fields(const JobParams& p) {
  const auto& [dataset, num_samples, batch_size, world_size, seed, shuffle, start_epoch,
               start_position, fingerprint, owner, shuffle_shape] = p;
  return std::tie(dataset, num_samples, batch_size, world_size, seed, shuffle, start_epoch,
                  start_position, fingerprint, owner.uid, owner.team, owner.privileged,
                  shuffle_shape.digest, shuffle_shape.window);
}
auto Fields(const PositionRange& r) {
  const auto& [begin, end] = r;
  return std::tie(begin, end);
}
auto Fields(const BatchLease& l) {
  const auto& [epoch, batch, index_in_epoch, last_in_epoch, step_end, step_begin, positions,
               sample_ids] = l;
  return std::tie(epoch, batch, index_in_epoch, last_in_epoch, step_end, step_begin,
                  positions.begin, positions.end, sample_ids);
}
auto Fields(const HeldBatch& h) {
  const auto& [epoch, batch, consumed] = h;
  return std::tie(epoch, batch, consumed);
}
auto Fields(const RankBatch& c) {
  const auto& [rank, epoch, batch] = c;
  return std::tie(rank, epoch, batch);
}
auto Fields(const RankWant& w) {
  const auto& [rank, epoch] = w;
  return std::tie(rank, epoch);
}
auto Fields(const DecodeRequest& r) {
  const auto& [dataset, fingerprint, seed, epoch, ids, caller] = r;
  return std::tie(dataset, fingerprint, seed, epoch, ids, caller.uid, caller.team,
                  caller.privileged);
}

namespace {

using wire_testing::CheckEveryFieldSet;
using wire_testing::CheckSameFields;
using wire_testing::CheckSchemaFilledBy;
using wire_testing::RoundTrip;

struct PeerWire {
  template <typename T, typename Builder>
  static void To(const T& value, Builder builder) {
    peer_wire::ToRpc(value, builder);
  }
  template <typename Reader>
  static auto From(Reader reader) {
    return peer_wire::FromRpc(reader);
  }
};

template <typename Rpc, typename T>
void CheckConverter(const T& filled) {
  wire_testing::CheckConverter<Rpc, PeerWire>(filled);
}

// Each struct with every field unlike its default and unlike the other fields.
JobParams FilledParams() {
  JobParams p;
  p.dataset = "params-dataset";
  p.num_samples = 101;
  p.batch_size = 102;
  p.world_size = 103;
  p.seed = 104;
  p.shuffle = false;  // the default is true
  p.start_epoch = 105;
  p.start_position = 106;
  p.fingerprint = 107;
  p.owner.uid = 108;
  p.owner.team = true;
  p.owner.privileged = true;
  p.shuffle_shape.digest = 250;
  p.shuffle_shape.window = 3;
  return p;
}

TEST_CASE("peer wire: JobParams round-trips every field, its owner's included") {
  // `shuffle` defaults to true here and to false in the schema: no one value is unlike
  // both, so the C++ side is checked with false and the schema side with true.
  const JobParams filled = FilledParams();
  CheckEveryFieldSet(filled);
  JobParams shuffled = filled;
  shuffled.shuffle = true;
  CheckSchemaFilledBy<rpc::JobParams, PeerWire>(shuffled);
  CheckSameFields(RoundTrip<rpc::JobParams, PeerWire>(filled), filled);
  CheckSameFields(RoundTrip<rpc::JobParams, PeerWire>(shuffled), shuffled);
  CheckSameFields(RoundTrip<rpc::JobParams, PeerWire>(JobParams{}), JobParams{});
  // Not a default-constructed Principal's uid: the schema's default must say "unknown".
  capnp::MallocMessageBuilder message;
  CHECK(peer_wire::FromRpc(message.initRoot<rpc::JobParams>().asReader()).owner.uid ==
        Principal{}.uid);
}

TEST_CASE("peer wire: Principal, HeldBatch, RankBatch and RankWant round-trip every field") {
  Principal principal;
  principal.uid = 201;
  principal.team = true;
  principal.privileged = true;
  CheckConverter<rpc::Principal>(principal);
  CheckConverter<rpc::HeldBatch>(HeldBatch{301, 302, true});
  CheckConverter<rpc::RankBatch>(RankBatch{401, 402, 403});
  CheckConverter<rpc::RankWant>(RankWant{501, 502});
}

TEST_CASE("peer wire: a BatchLease carries positions, not sample ids (protocol 4)") {
  BatchLease lease;
  lease.epoch = 601;
  lease.batch = 602;
  lease.index_in_epoch = 602;  // = batch, always (job_coordinator.h)
  lease.last_in_epoch = true;
  lease.step_end = 603;
  lease.step_begin = 600;
  lease.positions = {604, 605};
  lease.sample_ids = {606, 607};
  CheckEveryFieldSet(lease);
  // sampleIds is the old protocols' field: the receiving node looks the ids up itself.
  CheckSchemaFilledBy<rpc::BatchLease, PeerWire>(lease, {"sampleIds"});
  BatchLease sent = lease;
  sent.sample_ids.clear();
  CheckSameFields(RoundTrip<rpc::BatchLease, PeerWire>(lease), sent);
  CheckSameFields(RoundTrip<rpc::BatchLease, PeerWire>(BatchLease{}), BatchLease{});
}

TEST_CASE("peer wire: a DecodeRequest round-trips every field; none sent is an unknown caller") {
  DecodeRequest request;
  request.dataset = "decode-dataset";
  request.fingerprint = 701;
  request.seed = 702;
  request.epoch = 703;
  request.ids = {704, 705};
  request.caller.uid = 706;
  request.caller.team = true;
  request.caller.privileged = true;
  CheckConverter<rpc::DecodeRequest>(request);
  capnp::MallocMessageBuilder message;
  CHECK(peer_wire::FromRpc(message.initRoot<rpc::DecodeRequest>().asReader()).caller.uid ==
        Principal{}.uid);
}

TEST_CASE("peer wire: lists convert element by element, in order") {
  const std::vector<RankWant> wants = {{1, 2}, {3, 4}, {5, 6}};
  capnp::MallocMessageBuilder message;
  auto exchange = message.initRoot<rpc::Peer::ExchangeParams>();
  peer_wire::ToRpc(wants, exchange.initWants(wants.size()));
  std::vector<RankWant> back = peer_wire::FromRpcList(exchange.asReader().getWants());
  REQUIRE(back.size() == wants.size());
  for (size_t i = 0; i < wants.size(); ++i) CheckSameFields(back[i], wants[i]);
}

}  // namespace
}  // namespace ember::daemon
