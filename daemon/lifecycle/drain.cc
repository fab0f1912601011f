#include "daemon/lifecycle/drain.h"

namespace ember::daemon {

namespace {

constexpr kj::Duration kPollInterval = 10 * kj::MILLISECONDS;

kj::Promise<size_t> WaitDrained(kj::Timer& timer, StreamManager& streams, kj::TimePoint deadline) {
  const size_t in_flight = streams.BatchesInFlight();
  if (in_flight == 0 || timer.now() >= deadline) return in_flight;
  return timer.afterDelay(kPollInterval).then([&timer, &streams, deadline] {
    return WaitDrained(timer, streams, deadline);
  });
}

}  // namespace

kj::Promise<size_t> DrainStreams(kj::Timer& timer, StreamManager& streams, kj::Duration timeout) {
  streams.BeginDrain();
  return WaitDrained(timer, streams, timer.now() + timeout);
}

}  // namespace ember::daemon
