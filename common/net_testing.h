// Test helpers (tests only) for network servers started by tests.
#ifndef EMBER_COMMON_NET_TESTING_H_
#define EMBER_COMMON_NET_TESTING_H_

namespace ember {

// A loopback TCP port no one listened on a moment ago (for a server the test starts, or
// one that must come back on the same port). Fails the running test if none is found.
int FreeLoopbackPort();

}  // namespace ember

#endif  // EMBER_COMMON_NET_TESTING_H_
