// Test helper: a real S3 server, Debian's Ceph (a monitor, one OSD on memstore and
// radosgw) started by tools/ceph-s3 per test on a free loopback port, with an S3 user of
// random keys. Its configuration, data (in memory), logs and pids live in a fresh
// directory under $TEST_TMPDIR; starting takes about a second, stopping half of one.
// The cluster also stops if the test process dies (the script watches it).
#ifndef EMBER_DAEMON_DATA_REMOTE_S3_TESTING_H_
#define EMBER_DAEMON_DATA_REMOTE_S3_TESTING_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "daemon/data/remote/s3_config.h"

namespace ember::daemon {

// An S3 user's credentials.
struct S3Keys {
  std::string access_key;
  std::string secret_key;
};

// Not thread-safe; every method blocks until tools/ceph-s3 has finished.
class CephS3Server {
 public:
  // Serves S3 at http://127.0.0.1:PORT (`port`, or a free one if 0). Fails the running
  // test if the server does not answer an authenticated request within 60 s (naming
  // the log that says why), having stopped whatever it started.
  explicit CephS3Server(int port = 0);
  ~CephS3Server();  // stops rgw, the OSD and the monitor and waits until they are gone
  CephS3Server(const CephS3Server&) = delete;
  CephS3Server& operator=(const CephS3Server&) = delete;

  // "http://127.0.0.1:PORT".
  const std::string& endpoint() const { return endpoint_; }
  const std::string& access_key() const { return keys_.access_key; }
  const std::string& secret_key() const { return keys_.secret_key; }
  // What requests are signed with (SigV4's "aws:amz:REGION:s3").
  const std::string& region() const { return region_; }
  // The cluster's directory (logs in log/).
  const std::string& dir() const { return dir_; }

  // Creates `bucket` (owned by this server's user) if it does not exist and uploads the
  // file `local_path` as <prefix>/<its name>, or every file under the directory
  // `local_path` as <prefix>/<its path relative to local_path> (no "<prefix>/" if
  // `prefix` is empty). Fails the running test on error.
  void Put(const std::string& bucket, const std::string& local_path,
           const std::string& prefix = "");

  // Creates another S3 user, `name` (owning no buckets). Fails the running test on error.
  S3Keys NewUser(const std::string& name);

  // This server's configuration as emberd would load it from AWS_* variables (with no
  // ~/.aws files), with its user's keys or (`with_keys` false) none.
  std::shared_ptr<const S3Config> Config(bool with_keys = true) const;

 private:
  std::string script_;
  std::string base_;  // dir_, and the scripts' command outputs beside it
  std::string dir_;
  std::string endpoint_;
  std::string region_;
  S3Keys keys_;
  pid_t supervisor_ = -1;      // `ceph-s3 start --foreground`, the daemons' parent
  int supervisor_stdin_ = -1;  // closing it stops the cluster too
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_REMOTE_S3_TESTING_H_
