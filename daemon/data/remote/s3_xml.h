// S3's XML answers, parsed with libxml2 (no network, no entity expansion): error
// documents and ListObjectsV2 pages. Thread-safe.
#ifndef EMBER_DAEMON_DATA_REMOTE_S3_XML_H_
#define EMBER_DAEMON_DATA_REMOTE_S3_XML_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ember/status.h"

namespace ember::daemon {

// <Error><Code>NoSuchKey</Code><Message>...</Message>...</Error>
struct S3Error {
  std::string code;
  std::string message;  // may be empty (radosgw sends none)
};

// The error document in `body`; nullopt if `body` is not one (not XML, another root,
// no Code).
std::optional<S3Error> ParseS3Error(const std::string& body);

struct S3Object {
  std::string key;
  uint64_t size = 0;
};

// One page of ListObjectsV2 (<ListBucketResult>).
struct S3ListPage {
  std::vector<S3Object> objects;      // <Contents>
  std::vector<std::string> prefixes;  // <CommonPrefixes><Prefix>
  bool truncated = false;             // <IsTruncated>
  std::string next_token;             // <NextContinuationToken>
};

// kDataLoss naming `what` if `body` is not a ListBucketResult document (or an object's
// Key or Size is missing or bad).
Result<S3ListPage> ParseListObjectsV2(const std::string& what, const std::string& body);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_REMOTE_S3_XML_H_
