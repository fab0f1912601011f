// LoopLinks: Cap'n Proto connections between event loops of this process (unix
// socketpairs), for capabilities that must live on one loop, the "home" (the daemon's main
// loop, where the job stores and their barriers are), and be called from another (a peer
// loop, peer_loops.h). Cap'n Proto objects belong to one thread; a link is how a
// connection served on a peer loop reaches what lives at home, by the same RPC it speaks.
#ifndef EMBER_DAEMON_PEER_LOOP_LINKS_H_
#define EMBER_DAEMON_PEER_LOOP_LINKS_H_

#include <capnp/capability.h>
#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/function.h>

#include <memory>

namespace ember::daemon {

class LoopLinks final : private kj::TaskSet::ErrorHandler {
 public:
  // The calling end of one link: its capability, on the loop that connected it. Dropping
  // it closes the link; the home end, and what `serve` made there, go then.
  class Link {
   public:
    virtual ~Link() noexcept(false) = default;
    virtual capnp::Capability::Client capability() = 0;
  };

  // Call on the home loop's thread; `home` must outlive the links' home ends (this).
  explicit LoopLinks(kj::AsyncIoContext& home);
  // Closes the home ends of every link (their calling ends see a disconnect).
  ~LoopLinks();

  // From a loop other than home, `io` being it: a new link to the capability `serve` makes
  // on the home loop (run there, once). Calls made before the home end is up wait in the
  // socket. A home loop that has exited shows as a disconnect on the first call.
  std::unique_ptr<Link> Connect(kj::AsyncIoContext& io,
                                kj::Function<capnp::Capability::Client()> serve);

  // Home ends open now. Home thread only.
  size_t size() const { return open_; }

 private:
  struct HomeEnd;
  void taskFailed(kj::Exception&& exception) override;

  kj::AsyncIoContext& home_;
  kj::Own<const kj::Executor> executor_;
  size_t open_ = 0;   // home thread only, as:
  kj::TaskSet ends_;  // each link's home end, until it disconnects
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_LOOP_LINKS_H_
