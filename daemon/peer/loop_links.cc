#include "daemon/peer/loop_links.h"

#include <sys/socket.h>

#include <kj/debug.h>
#include <kj/io.h>
#include <spdlog/spdlog.h>

#include <utility>

namespace ember::daemon {

namespace {

constexpr uint kWrapFlags = kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP |
                            kj::LowLevelAsyncIoProvider::ALREADY_CLOEXEC |
                            kj::LowLevelAsyncIoProvider::ALREADY_NONBLOCK;

// One end of a link: the socket and the RPC system on it.
struct End {
  End(kj::Own<kj::AsyncIoStream> s, capnp::rpc::twoparty::Side side)
      : stream(kj::mv(s)), network(*stream, side) {}
  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyVatNetwork network;
};

struct CallingEnd final : LoopLinks::Link, End {
  explicit CallingEnd(kj::Own<kj::AsyncIoStream> s)
      : End(kj::mv(s), capnp::rpc::twoparty::Side::CLIENT), rpc(capnp::makeRpcClient(network)) {
    capnp::word scratch[4];
    memset(&scratch, 0, sizeof(scratch));
    capnp::MallocMessageBuilder message(scratch);
    auto vat = message.getRoot<capnp::rpc::twoparty::VatId>();
    vat.setSide(capnp::rpc::twoparty::Side::SERVER);
    bootstrap = rpc.bootstrap(vat);
  }
  capnp::Capability::Client capability() override { return bootstrap; }

  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
  capnp::Capability::Client bootstrap = nullptr;
  kj::Promise<void> started = nullptr;  // the home end being made; dropped with the link
};

}  // namespace

struct LoopLinks::HomeEnd : End {
  HomeEnd(kj::Own<kj::AsyncIoStream> s, capnp::Capability::Client served)
      : End(kj::mv(s), capnp::rpc::twoparty::Side::SERVER),
        rpc(capnp::makeRpcServer(network, kj::mv(served))) {}
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
};

LoopLinks::LoopLinks(kj::AsyncIoContext& home)
    : home_(home), executor_(kj::getCurrentThreadExecutor().addRef()), ends_(*this) {}

LoopLinks::~LoopLinks() = default;

std::unique_ptr<LoopLinks::Link> LoopLinks::Connect(
    kj::AsyncIoContext& io, kj::Function<capnp::Capability::Client()> serve) {
  int fds[2];
  KJ_SYSCALL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds),
             "a link to the daemon's main loop");
  kj::AutoCloseFd home_fd(fds[1]);
  auto link = std::make_unique<CallingEnd>(io.lowLevelProvider->wrapSocketFd(fds[0], kWrapFlags));
  link->started =
      executor_
          ->executeAsync([this, fd = kj::mv(home_fd), serve = kj::mv(serve)]() mutable {
            auto end = kj::heap<HomeEnd>(home_.lowLevelProvider->wrapSocketFd(fd.release(), kWrapFlags),
                                         serve());
            auto gone = end->network.onDisconnect();
            ++open_;
            ends_.add(gone.attach(kj::mv(end)).then([this] { --open_; }));
          })
          .eagerlyEvaluate([](kj::Exception&& e) {
            spdlog::warn("a link to the daemon's main loop failed: {}",
                         e.getDescription().cStr());
          });
  return link;
}

void LoopLinks::taskFailed(kj::Exception&& exception) {
  spdlog::debug("a loop link ended: {}", exception.getDescription().cStr());
}

}  // namespace ember::daemon
