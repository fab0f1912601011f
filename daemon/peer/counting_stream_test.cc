#include "daemon/peer/counting_stream.h"

#include <catch2/catch.hpp>

#include <memory>
#include <string>

namespace ember::daemon {
namespace {

TEST_CASE("CountTraffic counts the bytes written and read, adding up several streams") {
  auto io = kj::setupAsyncIo();
  auto traffic = std::make_shared<StreamTraffic>();
  auto pipe = io.provider->newTwoWayPipe();
  auto counted = CountTraffic(kj::mv(pipe.ends[0]), traffic);

  counted->write("hello", 5).wait(io.waitScope);
  const kj::ArrayPtr<const kj::byte> pieces[] = {
      kj::StringPtr("ab").asBytes(), kj::StringPtr("cde").asBytes()};
  counted->write(kj::arrayPtr(pieces, 2)).wait(io.waitScope);
  char got[10] = {};
  CHECK(pipe.ends[1]->read(got, 10, 10).wait(io.waitScope) == 10);
  CHECK(std::string(got, 10) == "helloabcde");
  CHECK(traffic->bytes_sent == 10);
  CHECK(traffic->bytes_received == 0);

  pipe.ends[1]->write("xyz", 3).wait(io.waitScope);
  char back[3] = {};
  CHECK(counted->read(back, 3, 3).wait(io.waitScope) == 3);
  CHECK(traffic->bytes_received == 3);

  // A second stream adds to the same counter.
  auto other = io.provider->newTwoWayPipe();
  auto second = CountTraffic(kj::mv(other.ends[0]), traffic);
  second->write("1234", 4).wait(io.waitScope);
  CHECK(traffic->bytes_sent == 14);
}

}  // namespace
}  // namespace ember::daemon
