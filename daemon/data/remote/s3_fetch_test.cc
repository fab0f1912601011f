// HttpFetcher and ListS3 against a real S3 server (Ceph's radosgw, s3_testing.h): signed
// reads, listings page by page, and what each refusal says (never the secret).
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/mem_env.h"
#include "common/temp_dir_testing.h"
#include "daemon/data/remote/http_fetch.h"
#include "daemon/data/remote/s3_config.h"
#include "daemon/data/remote/s3_list.h"
#include "daemon/data/remote/s3_testing.h"
#include "daemon/data/remote/shard_cache.h"

namespace ember::daemon {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The configuration LoadS3Config makes of `server`'s endpoint and region and `keys`
// given as the AWS_* variables (no files).
std::shared_ptr<const S3Config> ConfigFor(const CephS3Server& server, const S3Keys& keys,
                                          const std::string& token = "") {
  std::map<std::string, std::string> vars = {{"AWS_ENDPOINT_URL_S3", server.endpoint()},
                                             {"AWS_REGION", server.region()}};
  if (!keys.access_key.empty()) {
    vars["AWS_ACCESS_KEY_ID"] = keys.access_key;
    vars["AWS_SECRET_ACCESS_KEY"] = keys.secret_key;
  }
  if (!token.empty()) vars["AWS_SESSION_TOKEN"] = token;
  MemEnv env;
  Result<S3Config> config = LoadS3Config(env, [&](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
  REQUIRE(config.ok());
  return std::make_shared<const S3Config>(*config);
}

HttpFetcher FetcherFor(std::shared_ptr<const S3Config> config) {
  FetchOptions options;
  options.s3 = std::move(config);
  options.attempts = 2;
  options.first_backoff = std::chrono::milliseconds(10);
  return HttpFetcher(options);
}

Status Collect(const HttpFetcher& fetcher, const std::string& url,
               const std::optional<ByteRange>& range, std::string* body) {
  body->clear();
  return fetcher.Get(url, range, [&](uint64_t offset, const char* data, size_t size) {
    body->resize(offset);
    body->append(data, size);
    return Status::Ok();
  });
}

std::string ShardBytes(int i) { return "shard " + std::to_string(i) + std::string(100 + i, 'x'); }

// Bucket "data": pre/shard-0.tar .. pre/shard-4.tar, pre/notes.txt, "pre/sp ace+plus.tar"
// and pre/sub/deep.tar.
void Upload(CephS3Server& server) {
  const std::string dir = FreshTestDir("s3-upload");
  for (int i = 0; i < 5; ++i) WriteTestFile(dir + "/shard-" + std::to_string(i) + ".tar", ShardBytes(i));
  WriteTestFile(dir + "/notes.txt", "notes");
  WriteTestFile(dir + "/sp ace+plus.tar", "spaced");
  WriteTestFile(dir + "/sub/deep.tar", "deep");
  server.Put("data", dir, "pre");
}

TEST_CASE("S3 objects read signed: whole, by range, HEAD, through the shard cache; listings by pages") {
  CephS3Server server;
  Upload(server);
  const auto config = ConfigFor(server, S3Keys{server.access_key(), server.secret_key()});
  const HttpFetcher fetcher = FetcherFor(config);
  const std::string url = S3ObjectUrl(*config, S3Location{"data", "pre/shard-3.tar"});
  CHECK(url == "s3+" + server.endpoint() + "/data/pre/shard-3.tar");

  std::string body;
  Status status = Collect(fetcher, url, std::nullopt, &body);
  INFO(status.ToString());
  REQUIRE(status.ok());
  CHECK(body == ShardBytes(3));
  REQUIRE(Collect(fetcher, url, ByteRange{2, 5}, &body).ok());
  CHECK(body == ShardBytes(3).substr(2, 5));
  Result<ObjectInfo> info = fetcher.Stat(url);
  REQUIRE(info.ok());
  CHECK(info->size == ShardBytes(3).size());
  CHECK_FALSE(info->etag.empty());
  // A key that needs encoding is signed as S3 canonicalizes it.
  status = Collect(fetcher, S3ObjectUrl(*config, S3Location{"data", "pre/sp ace+plus.tar"}),
                   std::nullopt, &body);
  INFO(status.ToString());
  REQUIRE(status.ok());
  CHECK(body == "spaced");
  // A session token goes along (radosgw without STS ignores it).
  REQUIRE(Collect(FetcherFor(ConfigFor(server, S3Keys{server.access_key(), server.secret_key()},
                                       "session-token")),
                  url, std::nullopt, &body)
              .ok());

  // The shard cache keys on the internal URL.
  auto env = NewPosixEnv();
  auto cache = ShardCache::Open(*env, FreshTestDir("s3-cache"), 1 << 20, fetcher);
  REQUIRE(cache.ok());
  auto mapped = (*cache)->Get(url);
  REQUIRE(mapped.ok());
  CHECK(std::string((*mapped)->data(), (*mapped)->size()) == ShardBytes(3));
  CHECK((*cache)->Contains(url));

  // Pages of 2: the 7 objects directly under pre/ in 4 requests, pre/sub/ as a sub-prefix.
  S3ListOptions options;
  options.page_size = 2;
  Result<S3Listing> listing = ListS3(fetcher, S3Location{"data", "pre/"}, options);
  INFO((listing.ok() ? "" : listing.status().ToString()));
  REQUIRE(listing.ok());
  std::vector<std::string> keys;
  for (const S3Object& object : listing->objects) keys.push_back(object.key);
  CHECK(keys == std::vector<std::string>{"pre/notes.txt", "pre/shard-0.tar", "pre/shard-1.tar",
                                         "pre/shard-2.tar", "pre/shard-3.tar", "pre/shard-4.tar",
                                         "pre/sp ace+plus.tar"});
  CHECK(listing->objects[4].size == ShardBytes(3).size());
  CHECK(listing->prefixes == std::vector<std::string>{"pre/sub/"});
  CHECK(listing->pages == 4);
  // Without a delimiter every key under the prefix; one page of 1000.
  options.delimiter.clear();
  options.page_size = 1000;
  listing = ListS3(fetcher, S3Location{"data", "pre/s"}, options);
  REQUIRE(listing.ok());
  CHECK(listing->objects.size() == 7);  // shard-*, sp ace, sub/deep
  CHECK(listing->pages == 1);
  options.max_objects = 3;
  options.page_size = 2;
  CHECK(ListS3(fetcher, S3Location{"data", "pre/"}, options).status().message() ==
        "listing s3://data/pre/: more than 3 objects");
}

TEST_CASE("S3 refusals name the bucket, the key and where the credentials came from, never the secret") {
  CephS3Server server;
  Upload(server);
  const S3Keys owner{server.access_key(), server.secret_key()};
  const auto config = ConfigFor(server, owner, "token-of-the-owner");
  const HttpFetcher fetcher = FetcherFor(config);
  const std::string prefix = "s3+" + server.endpoint();
  const std::string shard = prefix + "/data/pre/shard-0.tar";
  std::vector<std::string> messages;  // every error, checked for secrets at the end
  auto get = [&](const HttpFetcher& with, const std::string& url) {
    std::string body;
    const Status status = Collect(with, url, std::nullopt, &body);
    messages.push_back(status.ToString());
    return status;
  };
  auto stat = [&](const HttpFetcher& with, const std::string& url) {
    const Status status = with.Stat(url).status();
    messages.push_back(status.ToString());
    return status;
  };

  Status status = get(fetcher, prefix + "/data/pre/missing.tar");
  CHECK(status.code() == StatusCode::kNotFound);
  CHECK(status.message() == "GET " + prefix +
                                "/data/pre/missing.tar: HTTP 404 (NoSuchKey): bucket 'data' has "
                                "no key 'pre/missing.tar'");
  status = stat(fetcher, prefix + "/data/pre/missing.tar");  // a HEAD, then a GET for the code
  CHECK(status.code() == StatusCode::kNotFound);
  CHECK(status.message() == "HEAD " + prefix +
                                "/data/pre/missing.tar: HTTP 404 (NoSuchKey): bucket 'data' has "
                                "no key 'pre/missing.tar'");
  status = get(fetcher, prefix + "/nobucket/x.tar");
  CHECK(status.code() == StatusCode::kNotFound);
  CHECK(status.message() == "GET " + prefix + "/nobucket/x.tar: HTTP 404 (NoSuchBucket): no "
                                "bucket 'nobucket' at " + server.endpoint());
  const Status listed = ListS3(fetcher, S3Location{"nobucket", "pre/"}).status();
  messages.push_back(listed.ToString());
  CHECK(listed.code() == StatusCode::kNotFound);
  CHECK(listed.message() == "listing s3://nobucket/pre/: GET " + prefix +
                                "/nobucket: HTTP 404 (NoSuchBucket): no bucket 'nobucket' at " +
                                server.endpoint());

  // The owner's access key with another secret.
  const S3Keys wrong{owner.access_key, "wrong" + owner.secret_key.substr(5)};
  status = get(FetcherFor(ConfigFor(server, wrong)), shard);
  CHECK(status.code() == StatusCode::kPermissionDenied);
  CHECK(status.message() == "GET " + shard +
                                ": HTTP 403 (SignatureDoesNotMatch): the secret key from "
                                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY does not match its "
                                "access key");
  // A key S3 does not know.
  status = get(FetcherFor(ConfigFor(server, S3Keys{"NOSUCHKEYID0000000000", owner.secret_key})), shard);
  CHECK(status.code() == StatusCode::kPermissionDenied);
  CHECK(Contains(status.message(), ": HTTP 403 (InvalidAccessKeyId): S3 at " + server.endpoint() +
                                       " knows no access key from AWS_ACCESS_KEY_ID and "
                                       "AWS_SECRET_ACCESS_KEY"));
  // Another user's keys: the bucket is not theirs.
  const S3Keys other = server.NewUser("other");
  const HttpFetcher others = FetcherFor(ConfigFor(server, other));
  status = get(others, shard);
  CHECK(status.code() == StatusCode::kPermissionDenied);
  CHECK(status.message() == "GET " + shard +
                                ": HTTP 403 (AccessDenied): the credentials from AWS_ACCESS_KEY_ID "
                                "and AWS_SECRET_ACCESS_KEY may not read bucket 'data' key "
                                "'pre/shard-0.tar'");
  status = stat(others, shard);
  CHECK(status.code() == StatusCode::kPermissionDenied);
  CHECK(Contains(status.message(), "HEAD " + shard + ": HTTP 403 (AccessDenied)"));
  const Status other_list = ListS3(others, S3Location{"data", "pre/"}).status();
  messages.push_back(other_list.ToString());
  CHECK(other_list.code() == StatusCode::kPermissionDenied);

  // Unsigned: the object's plain URL without credentials is refused by S3; the internal
  // form without an S3 configuration, or without credentials, is not even sent.
  status = get(HttpFetcher(), server.endpoint() + "/data/pre/shard-0.tar");
  CHECK(status.code() == StatusCode::kPermissionDenied);
  CHECK(status.message() == "GET " + server.endpoint() + "/data/pre/shard-0.tar: HTTP 403 Forbidden");
  status = get(HttpFetcher(), shard);
  CHECK(status.code() == StatusCode::kFailedPrecondition);
  CHECK(status.message() == "GET " + shard + ": this emberd has no S3 configuration");
  status = stat(FetcherFor(ConfigFor(server, S3Keys{})), shard);
  CHECK(status.code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(status.message(), "HEAD " + shard + ": emberd has no S3 credentials: it looked at "
                                   "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (unset)"));

  for (const std::string& message : messages) {
    INFO(message);
    CHECK_FALSE(Contains(message, owner.secret_key));
    CHECK_FALSE(Contains(message, wrong.secret_key));
    CHECK_FALSE(Contains(message, other.secret_key));
    CHECK_FALSE(Contains(message, "token-of-the-owner"));
  }
}

}  // namespace
}  // namespace ember::daemon
