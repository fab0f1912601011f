#include "daemon/lifecycle/watchdog.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <cstdint>

namespace ember::daemon {

kj::Duration WatchdogPingInterval() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return 0 * kj::SECONDS;
  return (usec / 2) * kj::MICROSECONDS;
}

kj::Promise<void> PingWatchdog(kj::Timer& timer, kj::Duration interval) {
  sd_notify(0, "WATCHDOG=1");
  return timer.afterDelay(interval).then(
      [&timer, interval] { return PingWatchdog(timer, interval); });
}

}  // namespace ember::daemon
