// Reading objects over HTTP(S) with libcurl: whole or by byte range, with connection
// reuse, deadlines, and retries with backoff where a retry can help. The transport of the
// remote dataset sources (webdataset shards at http(s):// URLs, and S3 objects: URLs of
// the form s3+http(s)://HOST[:PORT]/BUCKET/KEY (s3_config.h) are fetched at
// http(s)://HOST[:PORT]/BUCKET/KEY, signed by libcurl's SigV4 with FetchOptions::s3).
#ifndef EMBER_DAEMON_DATA_REMOTE_HTTP_FETCH_H_
#define EMBER_DAEMON_DATA_REMOTE_HTTP_FETCH_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/data/remote/s3_config.h"
#include "ember/status.h"

namespace ember::daemon {

struct FetchOptions {
  std::chrono::milliseconds connect_timeout{10000};
  // A transfer that moves no byte for this long is abandoned (then retried).
  std::chrono::milliseconds stall_timeout{30000};
  int attempts = 4;  // tries per request: 5xx, 429, timeouts and lost connections retry
  std::chrono::milliseconds first_backoff{200};  // doubled after each failed try
  std::vector<std::string> headers;  // extra request headers ("Name: value")
  // Addresses never connected to, by prefix of their text form (after DNS, redirects
  // included): link-local ones by default, where cloud instance metadata (and its
  // credentials) answers, so that a dataset's URL cannot make emberd fetch it for a user.
  std::vector<std::string> refused_addresses = {"169.254.", "fe80:", "::ffff:169.254."};
  // What s3+http(s):// URLs are signed with (region, credentials), shared by the copies of
  // these options; null, or `unusable`: such URLs are refused (saying why). A URL is
  // fetched at the host it names: this endpoint, or a dataset's own (DatasetSpec::endpoint).
  std::shared_ptr<const S3Config> s3;
};

// Bytes [offset, offset + length) of an object.
struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct ObjectInfo {
  uint64_t size = 0;
  std::string etag;  // as the server sent it (quotes included); empty if none
};

// Receives a response body: `size` bytes at `offset` from the start of what was asked
// for (the object or the range). A retried request starts again at offset 0.
using BodySink = std::function<Status(uint64_t offset, const char* data, size_t size)>;

// What an error shows of a URL: scheme, host, port and path; no user, password or query
// (credentials, signatures).
std::string RedactUrl(const std::string& url);

// Thread-safe: each thread reuses its own connection (libcurl handle) across requests.
// Errors name the request and what happened, e.g.
//   "GET http://host/d/s-000.tar (bytes 0-1023): HTTP 404 Not Found"      kNotFound
//   "GET http://host/d/s-000.tar: HTTP 503 after 4 attempts"              kUnavailable
//   "GET http://host/d/s-000.tar: no data for 30 s (stalled) after 4 attempts"
// kPermissionDenied for 401/403 and a refused address, kDataLoss for a body shorter or longer than the server
// announced, kInvalidArgument for a URL libcurl cannot use.
// S3 objects (s3+http(s):// URLs): the request is signed (SigV4 by libcurl, the session
// token as x-amz-security-token, an unsigned payload) and never follows a redirect; an
// error names S3's Code and Message (its XML error document; a failed HEAD, which has
// none, asks again with a one-byte GET) and what it means, e.g.
//   "GET s3+http://host:port/data/s-0.tar: HTTP 403 (AccessDenied: Access Denied): the
//    credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY may not read ..."
// kNotFound for NoSuchKey and NoSuchBucket (naming the bucket and key), kPermissionDenied
// for 401/403 and for rejected credentials (a wrong secret, an unknown key, an expired
// or invalid token (400 or 403), each naming where the credentials came from),
// kFailedPrecondition for a bucket of another region or endpoint (a redirect) and when
// emberd has no S3 credentials (naming what it looked at). 5xx (503 SlowDown) retry.
// Neither the secret nor the token ever appears in a message.
class HttpFetcher {
 public:
  explicit HttpFetcher(FetchOptions options = {});

  // HEAD: the object's size and ETag.
  Result<ObjectInfo> Stat(const std::string& url) const;

  // GET of the whole object (no range) or of `range`, its body to `sink`. A range must be
  // answered with 206 and exactly its bytes (else kDataLoss naming what came).
  Status Get(const std::string& url, const std::optional<ByteRange>& range,
             const BodySink& sink) const;

  // The connections opened so far by this process's fetchers (reuse keeps it low).
  static uint64_t connections_opened();

  const FetchOptions& options() const { return options_; }

 private:
  // One request with the retries: a HEAD when `sink` is null (filling `info`).
  Status Perform(const char* method, const std::string& url, const std::optional<ByteRange>& range,
                 const BodySink* sink, ObjectInfo* info) const;

  FetchOptions options_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_REMOTE_HTTP_FETCH_H_
