// The systemd watchdog (WatchdogSec=): emberd pings WATCHDOG=1 from its event loop, so a
// loop that stops turning stops the pings and systemd restarts the daemon.
#ifndef EMBER_DAEMON_LIFECYCLE_WATCHDOG_H_
#define EMBER_DAEMON_LIFECYCLE_WATCHDOG_H_

#include <kj/async.h>
#include <kj/timer.h>

namespace ember::daemon {

// Half the watchdog timeout systemd gave this process (WATCHDOG_USEC, and WATCHDOG_PID
// naming it if set: sd_watchdog_enabled), or 0 when there is none.
kj::Duration WatchdogPingInterval();

// Sends WATCHDOG=1 now and then every `interval` (> 0) on the calling thread's event loop,
// until the promise is dropped. Never completes; a failed send is ignored (as systemd
// would notice the missing pings).
kj::Promise<void> PingWatchdog(kj::Timer& timer, kj::Duration interval);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_LIFECYCLE_WATCHDOG_H_
