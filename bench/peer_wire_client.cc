#include "bench/peer_wire_client.h"

#include <capnp/rpc.capnp.h>
#include <capnp/serialize-async.h>
#include <kj/debug.h>

#include "schemas/peer.capnp.h"

namespace ember::bench {

kj::Promise<void> PeerWireClient::Bootstrap() {
  auto message = kj::heap<capnp::MallocMessageBuilder>();
  message->initRoot<capnp::rpc::Message>().initBootstrap().setQuestionId(kQuestion);
  return Ask(*message, kQuestion).attach(kj::mv(message)).then([this](Answer&& answer) {
    auto caps = answer.message->getRoot<capnp::rpc::Message>().getReturn().getResults().getCapTable();
    KJ_REQUIRE(caps.size() == 1 && caps[0].isSenderHosted(),
               "the bootstrap answer holds no capability the server hosts");
    peer_ = caps[0].getSenderHosted();
    have_peer_ = true;
  });
}

kj::Promise<PeerWireClient::Answer> PeerWireClient::Call(
    uint16_t method, kj::Function<void(capnp::AnyPointer::Builder params)> fill) {
  KJ_REQUIRE(have_peer_, "Call before Bootstrap");
  auto message = kj::heap<capnp::MallocMessageBuilder>();
  auto call = message->initRoot<capnp::rpc::Message>().initCall();
  call.setQuestionId(kQuestion);
  call.initTarget().setImportedCap(peer_);
  call.setInterfaceId(capnp::typeId<rpc::Peer>());
  call.setMethodId(method);
  fill(call.initParams().getContent());
  return Ask(*message, kQuestion).attach(kj::mv(message));
}

kj::Promise<PeerWireClient::Answer> PeerWireClient::Ask(capnp::MallocMessageBuilder& message,
                                                        uint32_t question) {
  kj::Promise<void> written = nullptr;
  if (finish_pending_) {
    auto finish = kj::heap<capnp::MallocMessageBuilder>(16);
    auto f = finish->initRoot<capnp::rpc::Message>().initFinish();
    f.setQuestionId(kQuestion);
    f.setReleaseResultCaps(false);  // a joinJob's Coordination stays: the rank stays joined
    capnp::MessageBuilder* both[] = {finish.get(), &message};
    written = capnp::writeMessages(*stream_, kj::arrayPtr(both, 2)).attach(kj::mv(finish));
  } else {
    written = capnp::writeMessage(*stream_, message);
  }
  finish_pending_ = false;
  return written.then([this] { return capnp::readMessage(*stream_); })
      .then([this, question](kj::Own<capnp::MessageReader>&& reader) {
        auto root = reader->getRoot<capnp::rpc::Message>();
        KJ_REQUIRE(root.isReturn(), "expected a Return message", root.which());
        auto ret = root.getReturn();
        KJ_REQUIRE(ret.getAnswerId() == question, "a Return for another question",
                   ret.getAnswerId());
        finish_pending_ = true;
        if (ret.isException())
          KJ_FAIL_REQUIRE("the server failed the call", ret.getException().getReason());
        KJ_REQUIRE(ret.isResults(), "a Return without results", ret.which());
        auto content = ret.getResults().getContent();
        return Answer{kj::mv(reader), content};
      });
}

}  // namespace ember::bench
