// What `emberctl dataset add` draws while a dataset registers and what `dataset inspect`
// adds to a dataset's lines.
#include "tools/emberctl/dataset_command.h"

#include <catch2/catch.hpp>

#include <string>

namespace ember::emberctl {
namespace {

TEST_CASE("sizes read in binary units") {
  CHECK(Bytes(0) == "0 B");
  CHECK(Bytes(1023) == "1023 B");
  CHECK(Bytes(1536) == "1.5 KiB");
  CHECK(Bytes(12 * 1048576ull) == "12.0 MiB");
  CHECK(Bytes(3ull << 40) == "3.0 TiB");
}

TEST_CASE("the progress line: shards of the total, bytes, rate and time left") {
  RegistrationProgress p;
  p.dataset = "web";
  p.elapsed_seconds = 0.4;
  CHECK(RenderProgress(p) == "indexing web: listing shards (0.4 s)");
  p.shards_total = 10;
  CHECK(RenderProgress(p) == "indexing web: 0/10 shards, 0 B (0.4 s)");
  p.shards_done = 2;
  p.bytes_done = 8 * 1048576;
  p.elapsed_seconds = 4;
  CHECK(RenderProgress(p) == "indexing web: 2/10 shards, 8.0 MiB, 2.0 MiB/s, ETA 16 s (4.0 s)");
  p.shards_done = 1;
  p.shards_total = 200;
  p.elapsed_seconds = 1;
  CHECK(RenderProgress(p) ==
        "indexing web: 1/200 shards, 8.0 MiB, 8.0 MiB/s, ETA 3 min 19 s (1.0 s)");
  p.shards_done = 200;
  CHECK(RenderProgress(p).find("ETA") == std::string::npos);
}

TEST_CASE("inspect's details: source, shards, index memory, shuffle, and the cache if remote") {
  DatasetDetails d;
  d.info.spec.shuffle = "shards";
  d.info.spec.shuffle_window = 4;
  d.source = "http://host/d/s-{000..009}.tar";
  d.shards = 10;
  d.index_bytes = 2048;
  d.remote = true;
  d.shards_cached = 3;
  d.bytes_cached = 3 * 1048576;
  CHECK(RenderDetails(d) ==
        "  source  http://host/d/s-{000..009}.tar\n"
        "  shards  10\n"
        "  index   2.0 KiB in emberd's memory (owner's dataset_memory)\n"
        "  shuffle shards, 4 shards at a time\n"
        "  cache   3/10 shards cached, 3.0 MiB\n");

  DatasetDetails s3;
  s3.info.spec.shuffle = "samples";
  s3.info.spec.endpoint = "http://127.0.0.1:7480";
  s3.source = "s3://data/train/";
  CHECK(RenderDetails(s3) ==
        "  source  s3://data/train/\n  endpoint http://127.0.0.1:7480\n  shuffle samples\n");

  DatasetDetails local;
  local.info.spec.shuffle = "samples";
  local.source = "/data/mnist";
  CHECK(RenderDetails(local) == "  source  /data/mnist\n  shuffle samples\n");
}

}  // namespace
}  // namespace ember::emberctl
