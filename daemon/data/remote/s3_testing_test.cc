#include "daemon/data/remote/s3_testing.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/temp_dir_testing.h"

namespace ember::daemon {
namespace {

struct Response {
  std::string code;  // "200", "403", ...
  std::string body;
};

// GET `path` from the server with the system curl, SigV4-signed with `keys` unless they
// are empty.
Response CurlGet(const CephS3Server& server, const std::string& path, const S3Keys& keys) {
  const std::string body_path = TestTmpDir() + "/curl-body";
  std::string command = "/usr/bin/curl -s -o '" + body_path + "' -w '%{http_code}' ";
  if (!keys.access_key.empty()) {
    command += "--aws-sigv4 'aws:amz:" + server.region() + ":s3' --user '" + keys.access_key + ":" +
               keys.secret_key + "' -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' ";
  }
  command += "'" + server.endpoint() + path + "'";
  FILE* curl = popen(command.c_str(), "r");
  REQUIRE(curl != nullptr);
  Response response;
  char buffer[256];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), curl)) > 0) response.code.append(buffer, n);
  INFO(command);
  REQUIRE(pclose(curl) == 0);
  response.body = ReadTestFile(body_path);
  return response;
}

// "pid: command line" of every live process whose command line mentions `text`.
std::vector<std::string> ProcessesMentioning(const std::string& text) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == std::to_string(getpid()))
      continue;
    std::ifstream in(entry.path() / "cmdline");  // empty for a zombie
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    if (cmdline.find(text) != std::string::npos) found.push_back(pid + ": " + cmdline);
  }
  return found;
}

TEST_CASE("CephS3Server serves what Put uploaded to its user only, and leaves nothing running") {
  std::string dir;
  {
    CephS3Server server;
    dir = server.dir();
    CHECK(server.endpoint().rfind("http://127.0.0.1:", 0) == 0);
    CHECK(ProcessesMentioning(dir + "/ceph.conf").size() == 3);  // mon, osd, rgw

    const std::string local = FreshTestDir("upload");
    WriteTestFile(local + "/shard-0.tar", "first shard");
    WriteTestFile(local + "/sub/shard-1.tar", "second shard");
    server.Put("data", local, "train");
    const S3Keys owner{server.access_key(), server.secret_key()};

    Response got = CurlGet(server, "/data/train/shard-0.tar", owner);
    CHECK(got.code == "200");
    CHECK(got.body == "first shard");
    got = CurlGet(server, "/data/train/sub/shard-1.tar", owner);
    CHECK(got.code == "200");
    CHECK(got.body == "second shard");
    CHECK(CurlGet(server, "/data/train/missing.tar", owner).code == "404");

    // A file on its own, into an existing bucket, without a prefix.
    const std::string single = WriteTempFile("single.bin", "single");
    server.Put("data", single);
    CHECK(CurlGet(server, "/data/single.bin", owner).body == "single");

    CHECK(CurlGet(server, "/data/train/shard-0.tar", S3Keys{}).code == "403");
    const S3Keys other = server.NewUser("other");
    CHECK(other.access_key != owner.access_key);
    CHECK(CurlGet(server, "/data/train/shard-0.tar", other).code == "403");
    CHECK(CurlGet(server, "/", other).code == "200");  // the other user's (empty) listing
  }
  INFO("processes left: " << ProcessesMentioning(dir).size());
  CHECK(ProcessesMentioning(dir).empty());
}

}  // namespace
}  // namespace ember::daemon
