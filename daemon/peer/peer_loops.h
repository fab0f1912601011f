// PeerLoops: event-loop threads, besides the daemon's main loop, on which peer connections
// are served (config key `peer_threads`), so that one core does not bound how many nodes
// one coordinator answers at once.
//
// Each thread runs its own kj event loop (kj::setupAsyncIo) and a TaskSet in which what
// runs on it lives: a connection is started on a loop by Run and stays on that loop's
// thread until it ends or the loop is cleared. Work reaches a loop through its
// kj::Executor; nothing on a loop may block waiting for the loop that called Run (it
// may call back into it with executeAsync: see Clear).
#ifndef EMBER_DAEMON_PEER_PEER_LOOPS_H_
#define EMBER_DAEMON_PEER_PEER_LOOPS_H_

#include <kj/async-io.h>
#include <kj/function.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace ember::daemon {

class PeerLoops {
 public:
  // What runs on one loop may use its io (provider, timer) and keep tasks in its TaskSet.
  struct Loop {
    kj::AsyncIoContext& io;
    kj::Own<kj::TaskSet> tasks;  // failures are logged (spdlog warn)
  };

  // Starts `threads` (>= 1) threads, each with its own event loop; returns once all run.
  explicit PeerLoops(unsigned threads);
  // Stops every loop (what its TaskSet holds is destroyed on its thread) and joins the
  // threads. Blocks: call Clear first when tasks on the loops may be waiting for the
  // calling loop.
  ~PeerLoops();
  PeerLoops(const PeerLoops&) = delete;
  PeerLoops& operator=(const PeerLoops&) = delete;

  unsigned size() const { return static_cast<unsigned>(threads_.size()); }

  // Runs `start` on the next loop (round robin), from the calling thread's event loop; the
  // promise resolves there once `start` has returned on its loop.
  kj::Promise<void> Run(kj::Function<void(Loop&)> start);

  // Destroys what every loop's TaskSet holds, each on its own thread. The caller's loop
  // keeps running while it waits (the promise is the caller's), so tasks on the loops
  // that call back into it end cleanly.
  kj::Promise<void> Clear();

 private:
  struct Thread;

  std::vector<std::unique_ptr<Thread>> threads_;
  std::atomic<unsigned> next_{0};
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_PEER_LOOPS_H_
