// Listing an S3 prefix: ListObjectsV2, page by page (continuation tokens), through an
// HttpFetcher (signed with its S3Config).
#ifndef EMBER_DAEMON_DATA_REMOTE_S3_LIST_H_
#define EMBER_DAEMON_DATA_REMOTE_S3_LIST_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/data/remote/http_fetch.h"
#include "daemon/data/remote/s3_config.h"
#include "daemon/data/remote/s3_xml.h"
#include "ember/status.h"

namespace ember::daemon {

struct S3ListOptions {
  // Objects directly under the prefix ('/'): deeper keys come back as `prefixes`, as a
  // directory's subdirectories do. Empty: every key under the prefix.
  std::string delimiter = "/";
  int page_size = 1000;  // S3's max-keys (its own limit is 1000); tests use small pages
  size_t max_objects = SIZE_MAX;  // more is kResourceExhausted
  // Where the bucket is: "http(s)://HOST[:PORT]" (a dataset's own endpoint); empty: the
  // fetcher's S3Config's endpoint. Signed with the fetcher's region and credentials.
  std::string endpoint;
};

struct S3Listing {
  std::vector<S3Object> objects;      // in S3's order (by key, bytewise)
  std::vector<std::string> prefixes;  // with the delimiter: the sub-prefixes
  int pages = 0;                      // requests made
};

// The objects of `location.bucket` whose keys start with `location.key`. Errors are the
// fetcher's (kNotFound for a missing bucket, kPermissionDenied, ...; with the listing as
// context: "listing s3://BUCKET/PREFIX: ..."), kDataLoss for a page that is not a
// listing or a truncated page without a new continuation token, kResourceExhausted past
// options.max_objects. Blocks on the requests; thread-safe as the fetcher is.
Result<S3Listing> ListS3(const HttpFetcher& fetcher, const S3Location& location,
                         const S3ListOptions& options = {});

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_REMOTE_S3_LIST_H_
