// DecodePool: the daemon's decode threads, shared by all streams and share groups.
#ifndef EMBER_DAEMON_STREAM_DECODE_POOL_H_
#define EMBER_DAEMON_STREAM_DECODE_POOL_H_

#include <atomic>
#include <cstdint>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

namespace ember::daemon {

// The daemon's decode threads, shared by all streams (sized by the decode_threads key).
struct DecodePool {
  explicit DecodePool(unsigned n) : threads(n == 0 ? 1 : n), pool(threads) {}
  // Runs `task` on one of the threads.
  template <typename Task>
  void Post(Task task) {
    queued.fetch_add(1, std::memory_order_relaxed);
    boost::asio::post(pool, [this, task = std::move(task)]() mutable {
      queued.fetch_sub(1, std::memory_order_relaxed);
      task();
    });
  }
  const unsigned threads;
  boost::asio::thread_pool pool;
  std::atomic<uint64_t> queued{0};  // tasks posted and not yet started
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_STREAM_DECODE_POOL_H_
