#include "daemon/data/webdataset/shard_list.h"

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "common/temp_dir_testing.h"
#include "daemon/data/remote/http_fetch.h"
#include "daemon/data/remote/s3_config.h"

namespace ember::daemon {
namespace {

using Names = std::vector<std::string>;

Names Expand(const std::string& pattern) {
  auto names = ExpandBraces(pattern);
  INFO(pattern << ": " << names.status().ToString());
  REQUIRE(names.ok());
  return *names;
}

TEST_CASE("brace patterns expand as webdataset's braceexpand does") {
  CHECK(Expand("/d/shard.tar") == Names{"/d/shard.tar"});
  CHECK(Expand("/d/s-{000..003}.tar") ==
        Names{"/d/s-000.tar", "/d/s-001.tar", "/d/s-002.tar", "/d/s-003.tar"});
  CHECK(Expand("/d/s-{8..11}.tar") == Names{"/d/s-8.tar", "/d/s-9.tar", "/d/s-10.tar", "/d/s-11.tar"});
  CHECK(Expand("/d/s-{0..10..5}") == Names{"/d/s-0", "/d/s-5", "/d/s-10"});
  CHECK(Expand("{3..1}") == Names{"3", "2", "1"});
  CHECK(Expand("/d/{train,val}-{0..1}.tar") ==
        Names{"/d/train-0.tar", "/d/train-1.tar", "/d/val-0.tar", "/d/val-1.tar"});
  CHECK(Expand("/d/s-{000000..099999}.tar").size() == 100000);
}

TEST_CASE("bad patterns are refused naming the pattern and the brace") {
  auto refused = [](const std::string& pattern, const std::string& message) {
    auto names = ExpandBraces(pattern);
    INFO(pattern);
    REQUIRE(names.status().code() == StatusCode::kInvalidArgument);
    CHECK(names.status().message() == message);
  };
  refused("/d/s-{0..3.tar", "shard pattern '/d/s-{0..3.tar': the '{' at offset 5 is never closed");
  refused("/d/{a{b}}", "shard pattern '/d/{a{b}}': the '{' at offset 3 is nested");
  refused("/d/a}", "shard pattern '/d/a}': '}' without '{' at offset 4");
  refused("/d/{a..9}", "shard pattern '/d/{a..9}': {a..9}: a range's bounds and step must be integers");
  refused("/d/{0..9..0}", "shard pattern '/d/{0..9..0}': {0..9..0}: a range's step must not be 0");
  refused("/d/{0..100000}", "shard pattern '/d/{0..100000}': {0..100000}: more than 100000 shards");
  refused("/{0..999}/{0..999}", "shard pattern '/{0..999}/{0..999}': {0..999}: more than 100000 shards");
  refused("{-9223372036854775807..9223372036854775807}",
          "shard pattern '{-9223372036854775807..9223372036854775807}': "
          "{-9223372036854775807..9223372036854775807}: more than 100000 shards");
}

TEST_CASE("a directory's .tar files, a single file, or a pattern whose shards all exist") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("shards");
  for (const char* name : {"b-1.tar", "a-0.tar", "notes.txt", "c-2.tar"})
    WriteTestFile(dir + "/" + name, "x");
  auto listed = ListShards(*env, dir);
  REQUIRE(listed.ok());
  CHECK(*listed == Names{dir + "/a-0.tar", dir + "/b-1.tar", dir + "/c-2.tar"});
  auto one = ListShards(*env, dir + "/b-1.tar");
  REQUIRE(one.ok());
  CHECK(*one == Names{dir + "/b-1.tar"});
  auto pattern = ListShards(*env, dir + "/{a-0,b-1}.tar");
  REQUIRE(pattern.ok());
  CHECK(pattern->size() == 2);
  auto missing = ListShards(*env, dir + "/{a-0,b-1,d-3}.tar");
  REQUIRE(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message() ==
        dir + "/d-3.tar: no such shard (of 3 that '" + dir + "/{a-0,b-1,d-3}.tar' names)");
  const std::string empty = FreshTestDir("no-shards");
  WriteTestFile(empty + "/readme", "x");
  auto none = ListShards(*env, empty);
  REQUIRE(none.status().code() == StatusCode::kNotFound);
  CHECK(none.status().message() == empty + ": no .tar shards in this directory");
}

TEST_CASE("s3:// objects and patterns become internal URLs at the configured endpoint") {
  auto env = NewPosixEnv();
  auto config = std::make_shared<S3Config>();
  config->endpoint = "https://s3.eu-west-1.amazonaws.com";
  config->region = "eu-west-1";
  config->access_key = "AKID";
  config->secret_key = "secret";
  FetchOptions options;
  options.s3 = config;
  const HttpFetcher fetcher(options);
  auto listed = ListShards(*env, "s3://data/train/s {0..1}.tar", &fetcher);
  REQUIRE(listed.ok());
  CHECK(*listed == Names{"s3+https://s3.eu-west-1.amazonaws.com/data/train/s%200.tar",
                         "s3+https://s3.eu-west-1.amazonaws.com/data/train/s%201.tar"});
  CHECK(IsRemoteShard(listed->front()));
  auto one = ListShards(*env, "s3://data/a.tar", &fetcher);
  REQUIRE(one.ok());
  CHECK(*one == Names{"s3+https://s3.eu-west-1.amazonaws.com/data/a.tar"});
  // A dataset's own endpoint instead of the configured one (a trailing '/' dropped).
  for (const std::string endpoint : {"http://127.0.0.1:7480", "http://127.0.0.1:7480/"}) {
    auto elsewhere = ListShards(*env, "s3://data/train/s {0..1}.tar", &fetcher, ".tar", endpoint);
    REQUIRE(elsewhere.ok());
    CHECK(*elsewhere == Names{"s3+http://127.0.0.1:7480/data/train/s%200.tar",
                              "s3+http://127.0.0.1:7480/data/train/s%201.tar"});
  }
  CHECK(ListShards(*env, "https://host/a.tar", &fetcher, ".tar", "http://127.0.0.1:7480")
            .status()
            .message() == "https://host/a.tar: endpoint is for s3:// paths");

  CHECK(ListShards(*env, "s3://data/a.tar").status().message() ==
        "s3://data/a.tar: this emberd has no shard cache to read S3 objects through");
  const HttpFetcher plain;
  CHECK(ListShards(*env, "s3://data/a.tar", &plain).status().message() ==
        "s3://data/a.tar: this emberd has no S3 configuration");
  config->unusable = FailedPrecondition("emberd has no S3 credentials: ...");
  CHECK(ListShards(*env, "s3://data/a.tar", &fetcher).status().message() ==
        "s3://data/a.tar: emberd has no S3 credentials: ...");
  CHECK(ListShards(*env, "s3:///a.tar", &fetcher).status().code() == StatusCode::kFailedPrecondition);
  config->unusable = Status::Ok();
  CHECK(ListShards(*env, "s3:///a.tar", &fetcher).status().code() == StatusCode::kInvalidArgument);
  auto internal = ListShards(*env, "s3+https://s3.eu-west-1.amazonaws.com/data/a.tar", &fetcher);
  CHECK(internal.status().message() ==
        "s3+https://s3.eu-west-1.amazonaws.com/data/a.tar: s3+http(s):// is emberd's own form "
        "of S3 objects; name them s3://BUCKET/KEY");
}

}  // namespace
}  // namespace ember::daemon
