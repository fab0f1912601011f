// Which shard files a dataset's path names, as WebDataset users write them.
#ifndef EMBER_DAEMON_DATA_WEBDATASET_SHARD_LIST_H_
#define EMBER_DAEMON_DATA_WEBDATASET_SHARD_LIST_H_

#include <cstddef>
#include <string>
#include <vector>

#include "common/env.h"
#include "daemon/data/remote/http_fetch.h"
#include "ember/status.h"

namespace ember::daemon {

// The most shards one dataset may have (a pattern is expanded in emberd's memory).
inline constexpr size_t kMaxShards = 100000;

// Expands the brace expressions of `pattern` as webdataset (braceexpand) does:
//   "/d/shard-{000000..000099}.tar"  numeric ranges, both bounds included, zero-padded to
//                                    the longer bound when either has a leading zero;
//                                    "{0..10..5}" with a step; descending works too
//   "/d/{train,extra}-{0..3}.tar"    comma lists; several braces multiply, left to right
// A pattern without braces is itself. kInvalidArgument naming the pattern for an unclosed
// or nested brace, a range whose bounds are not integers, a zero step, or more than
// kMaxShards names.
Result<std::vector<std::string>> ExpandBraces(const std::string& pattern);

// The shards of a dataset path: a directory's *.tar files (*`suffix`: parquet lists its
// .parquet files the same way; sorted by name; a directory without any is kNotFound), a
// single file, or a brace pattern (ExpandBraces; each file must exist: kNotFound naming
// the first missing one); or http(s):// URLs, one or a brace
// pattern (not checked here: a missing one fails its fetch); or S3 objects:
//   s3://BUCKET/KEY.tar, s3://BUCKET/shard-{000000..000009}.tar   objects (not checked
//                                                                 here either)
//   s3://BUCKET/PREFIX/, s3://BUCKET                              the .tar (suffix) objects
//       directly under the prefix, as a directory's (ListObjectsV2 through `remote`; none
//       is kNotFound naming the prefix and its sub-prefixes)
// each as its internal URL, s3+http(s)://ENDPOINT/BUCKET/KEY (s3_config.h), at
// `endpoint` (a dataset's own, "http(s)://HOST[:PORT]", listed there too) or, empty, at
// the endpoint of `remote`'s S3Config; either way signed with that S3Config's region and
// credentials. S3 needs `remote` with a usable S3Config (kFailedPrecondition saying what
// emberd looked at otherwise). Other schemes, the internal form itself, and an
// `endpoint` for a path other than s3:// are kInvalidArgument. Reads files through `env`
// (the caller's rights).
Result<std::vector<std::string>> ListShards(Env& env, const std::string& path,
                                            const HttpFetcher* remote = nullptr,
                                            const std::string& suffix = ".tar",
                                            const std::string& endpoint = "");

// Whether a shard path is a URL the shard cache fetches: http(s)://, or an S3 object's
// internal s3+http(s)://.
bool IsRemoteShard(const std::string& path);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_WEBDATASET_SHARD_LIST_H_
