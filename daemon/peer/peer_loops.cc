#include "daemon/peer/peer_loops.h"

#include <pthread.h>

#include <kj/debug.h>
#include <kj/vector.h>
#include <spdlog/spdlog.h>

#include <string>
#include <utility>

#include "common/mutex.h"

namespace ember::daemon {

// One thread and its loop. `executor` is set before the constructor returns and stays
// valid after the loop exits (execute* then throw DISCONNECTED); `loop` and `stop` are
// the thread's own.
struct PeerLoops::Thread final : kj::TaskSet::ErrorHandler {
  explicit Thread(unsigned index) {
    Mutex mu;
    CondVar cv;
    bool ready = false;
    thread = std::thread([this, index, &mu, &cv, &ready] {
      // As `top -H` shows it (15 characters at most).
      pthread_setname_np(pthread_self(), ("emberd-peer-" + std::to_string(index)).c_str());
      auto io = kj::setupAsyncIo();
      Loop here{io, kj::heap<kj::TaskSet>(*this)};
      auto stopped = kj::newPromiseAndFulfiller<void>();
      loop = &here;
      stop = kj::mv(stopped.fulfiller);
      {
        MutexLock lock(&mu);
        executor = kj::getCurrentThreadExecutor().addRef();
        ready = true;
      }
      cv.Signal();
      stopped.promise.wait(io.waitScope);
      loop = nullptr;
      spdlog::debug("peer loop {} stopped", index);
    });
    MutexLock lock(&mu);
    while (!ready) cv.Wait(&mu);
  }

  ~Thread() {
    // Fulfilled on the loop's own thread; what `tasks` holds goes as the loop unwinds.
    KJ_IF_MAYBE(e, kj::runCatchingExceptions([this] {
      executor->executeSync([this] { stop->fulfill(); });
    })) {
      spdlog::warn("stopping a peer loop: {}", e->getDescription().cStr());
    }
    thread.join();
  }

  void taskFailed(kj::Exception&& exception) override {
    spdlog::warn("peer loop task failed: {}", exception.getDescription().cStr());
  }

  std::thread thread;
  kj::Own<const kj::Executor> executor;
  Loop* loop = nullptr;
  kj::Own<kj::PromiseFulfiller<void>> stop;
};

PeerLoops::PeerLoops(unsigned threads) {
  KJ_REQUIRE(threads >= 1, "PeerLoops needs at least one thread");
  for (unsigned i = 0; i < threads; ++i) threads_.push_back(std::make_unique<Thread>(i));
}

PeerLoops::~PeerLoops() = default;

kj::Promise<void> PeerLoops::Run(kj::Function<void(Loop&)> start) {
  Thread& thread = *threads_[next_.fetch_add(1, std::memory_order_relaxed) % threads_.size()];
  return thread.executor->executeAsync(
      [&thread, start = kj::mv(start)]() mutable { start(*thread.loop); });
}

kj::Promise<void> PeerLoops::Clear() {
  kj::Vector<kj::Promise<void>> cleared;
  for (const std::unique_ptr<Thread>& thread : threads_) {
    Thread* t = thread.get();
    cleared.add(t->executor->executeAsync([t] {
      // The old set goes after the new one is in place: what it holds may add tasks.
      kj::Own<kj::TaskSet> old = kj::mv(t->loop->tasks);
      t->loop->tasks = kj::heap<kj::TaskSet>(*t);
    }));
  }
  return kj::joinPromises(cleared.releaseAsArray());
}

}  // namespace ember::daemon
