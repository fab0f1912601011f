// Test helper: a real nginx (Debian's) serving a directory over HTTP on a free loopback
// port, with byte ranges, started per test and stopped with it. Its configuration, pid,
// logs and temporary files live in a fresh directory under $TEST_TMPDIR.
#ifndef EMBER_DAEMON_DATA_REMOTE_NGINX_TESTING_H_
#define EMBER_DAEMON_DATA_REMOTE_NGINX_TESTING_H_

#include <sys/types.h>

#include <string>

namespace ember::daemon {

class NginxServer {
 public:
  // Serves `root` at http://127.0.0.1:PORT/ (`port`, or a free one if 0); any path under
  // /status-500/ answers 500. Fails the running test if nginx does not answer within
  // 10 s (naming its error log).
  explicit NginxServer(const std::string& root, int port = 0);
  ~NginxServer();  // SIGQUIT, then SIGKILL after 5 s
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:PORT" + path (path starts with '/').
  std::string Url(const std::string& path) const;

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_REMOTE_NGINX_TESTING_H_
