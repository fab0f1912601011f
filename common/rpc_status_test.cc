#include "common/rpc_status.h"

#include <catch2/catch.hpp>

namespace ember::rpc_status {
namespace {

kj::Exception Disconnected(const char* text) {
  return kj::Exception(kj::Exception::Type::DISCONNECTED, __FILE__, __LINE__,
                       kj::heapString(text));
}

TEST_CASE("a Status crosses as an exception and comes back with its code and message") {
  const Status sent = NotFound("dataset 'x' does not exist");
  const Status back = FromException(ToException(sent));
  CHECK(back.code() == StatusCode::kNotFound);
  CHECK(back.message() == "dataset 'x' does not exist");
  CHECK(ToException(ResourceExhausted("full")).getType() == kj::Exception::Type::OVERLOADED);
  // Forwarded by another daemon: one prefix per hop, the status unchanged.
  kj::Exception forwarded(kj::Exception::Type::FAILED, __FILE__, __LINE__,
                          kj::str("remote exception: remote exception: ",
                                  ToException(sent).getDescription()));
  CHECK(FromException(forwarded).message() == "dataset 'x' does not exist");
}

TEST_CASE("a lost connection names the caller's own link") {
  const Status lost = FromException(Disconnected("Peer disconnected."),
                                    Link{"emberd at /run/ember/emberd.sock", ""});
  CHECK(lost.code() == StatusCode::kUnavailable);
  CHECK(lost.message() ==
        "connection to emberd at /run/ember/emberd.sock lost: Peer disconnected.");
  CHECK(FromException(Disconnected("Peer disconnected.")).message() ==
        "connection to emberd lost: Peer disconnected.");
}

TEST_CASE("a connection lost beyond the callee names the callee and the link it lost") {
  const Link link{"emberd at /tmp/e.sock", "the job's coordinator 10.0.0.1:7100"};
  const Status lost =
      FromException(Disconnected("remote exception: Peer disconnected."), link);
  CHECK(lost.code() == StatusCode::kUnavailable);
  CHECK(lost.message() ==
        "emberd at /tmp/e.sock lost its connection to the job's coordinator 10.0.0.1:7100: "
        "Peer disconnected.");
  CHECK(FromException(Disconnected("remote exception: gone"), Link{"coordinator h:1", ""})
            .message() == "coordinator h:1 lost its connection to another daemon: gone");
}

TEST_CASE("an exception that is no Status is internal, with its text") {
  kj::Exception bug(kj::Exception::Type::FAILED, __FILE__, __LINE__, kj::heapString("boom"));
  const Status s = FromException(bug);
  CHECK(s.code() == StatusCode::kInternal);
  CHECK(s.message() == "boom");
  CHECK(FromDescription("not_found: x").code() == StatusCode::kNotFound);
  CHECK(FromDescription("whatever").code() == StatusCode::kInternal);
}

}  // namespace
}  // namespace ember::rpc_status
