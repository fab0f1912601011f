#include "daemon/server/unfinished_messages.h"

#include <capnp/message.h>
#include <capnp/serialize-async.h>
#include <kj/async-io.h>

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "common/rpc_status.h"

namespace ember::daemon {
namespace {

// The first bytes of a one-segment message whose body is `words` words.
std::vector<kj::byte> Header(uint32_t words) {
  std::vector<kj::byte> h(8, 0);
  for (int i = 0; i < 4; ++i) h[4 + i] = static_cast<kj::byte>(words >> (8 * i));
  return h;
}

// A socket pair whose end `read` is the daemon's side, bounded by `budget` (incoming)
// and `outgoing`; ends[0] is the client's.
struct Pipe {
  kj::AsyncIoContext& io;
  kj::CapabilityPipe pipe = io.provider->newCapabilityPipe();
  UnfinishedMessages own_outgoing{UnsentReplyLimits()};
  kj::Own<kj::AsyncCapabilityStream> read;

  Pipe(kj::AsyncIoContext& io, UnfinishedMessages& budget, uid_t uid, bool exempt = false,
       UnfinishedMessages* outgoing = nullptr)
      : io(io) {
    read = NewBoundedStream(kj::mv(pipe.ends[1]), budget, outgoing ? *outgoing : own_outgoing,
                            uid, exempt, io.provider->getTimer());
  }
  void Send(const std::vector<kj::byte>& bytes) {
    pipe.ends[0]->write(bytes.data(), bytes.size()).wait(io.waitScope);
  }
  // Reads what has arrived (at least one byte); the error it ends with, if any.
  Status ReadSome() {
    std::vector<kj::byte> buffer(1 << 20);
    auto read_some = read->tryRead(buffer.data(), 1, buffer.size());
    KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] { read_some.wait(io.waitScope); })) {
      return rpc_status::FromException(*e);
    }
    return Status::Ok();
  }
};

TEST_CASE("whole messages pass through; their bytes count only while they arrive") {
  auto io = kj::setupAsyncIo();
  UnfinishedMessages budget;
  Pipe pipe(io, budget, 2001);
  capnp::MallocMessageBuilder message;
  auto list = message.initRoot<capnp::AnyPointer>().initAs<capnp::List<uint64_t>>(1000);
  for (uint32_t i = 0; i < 1000; ++i) list.set(i, i * 3);
  for (int round = 0; round < 3; ++round) {
    auto written = capnp::writeMessage(*pipe.pipe.ends[0], message);
    auto read = capnp::readMessage(*pipe.read);
    written.wait(io.waitScope);
    auto reader = read.wait(io.waitScope);
    auto got = reader->getRoot<capnp::AnyPointer>().getAs<capnp::List<uint64_t>>();
    REQUIRE(got.size() == 1000);
    CHECK(got[999] == 2997);
    CHECK(budget.total() == 0);
  }
}

TEST_CASE("half-sent messages past a uid's share close its connection; another uid goes on") {
  auto io = kj::setupAsyncIo();
  UnfinishedLimits limits;
  limits.per_uid_bytes = 1 << 20;
  limits.total_bytes = 2 << 20;
  UnfinishedMessages budget(limits);
  auto first = std::make_unique<Pipe>(io, budget, 2001);
  Pipe second(io, budget, 2001), other(io, budget, 2002);
  const std::vector<kj::byte> header = Header(96 * 1024);  // 768 KiB each
  std::vector<kj::byte> some = header;
  some.resize(header.size() + 100, 7);
  first->Send(some);
  REQUIRE(first->ReadSome().ok());
  CHECK(budget.of(2001) == 768 * 1024);
  second.Send(some);
  const Status refused = second.ReadSome();
  CHECK(refused.code() == StatusCode::kResourceExhausted);
  CHECK(refused.message() ==
        "uid 2001: a message of 786432 bytes on top of 786432 in unfinished messages is over "
        "the limit of 1048576 per user");
  CHECK(budget.of(2001) == 768 * 1024);  // the refused one counts nothing
  other.Send(some);
  CHECK(other.ReadSome().ok());
  CHECK(budget.total() == 2 * 768 * 1024);
  // The daemon's total: a third uid's message would pass its share but not the total.
  Pipe third(io, budget, 2003);
  std::vector<kj::byte> big = Header(128 * 1024 - 1);  // just under 1 MiB
  big.resize(big.size() + 8, 1);
  third.Send(big);
  const Status full = third.ReadSome();
  CHECK(full.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(full.message(), Catch::Contains("over their limit of 2097152 bytes"));
  // A connection's end frees what it held.
  first.reset();
  CHECK(budget.of(2001) == 0);
}

TEST_CASE("a message whose header came must end within the deadline") {
  auto io = kj::setupAsyncIo();
  UnfinishedLimits limits;
  limits.deadline = 50 * kj::MILLISECONDS;
  UnfinishedMessages budget(limits);
  {
    Pipe slow(io, budget, 2001);
    std::vector<kj::byte> some = Header(1024);
    some.resize(some.size() + 64, 1);
    slow.Send(some);
    REQUIRE(slow.ReadSome().ok());
    const Status late = slow.ReadSome();  // the rest never comes
    CHECK(late.code() == StatusCode::kDeadlineExceeded);
    CHECK(late.message() ==
          "uid 2001: a message of 8192 bytes did not arrive within 50 ms of its header");
  }
  CHECK(budget.total() == 0);  // the connection's end gave it back
}

// A message of `words` words whole: header and body.
std::vector<kj::byte> Message(uint32_t words) {
  std::vector<kj::byte> m = Header(words);
  m.resize(m.size() + words * 8, 3);
  return m;
}

// Whether `promise` has settled, after the event loop ran what it could.
template <typename T>
bool Settled(kj::Promise<T>& promise, kj::WaitScope& wait_scope) {
  return promise.poll(wait_scope);
}

TEST_CASE("while a reply is unsent no call is read; once the client takes it, reading goes on") {
  auto io = kj::setupAsyncIo();
  UnfinishedMessages budget;
  UnfinishedMessages outgoing(UnsentReplyLimits());
  Pipe pipe(io, budget, 2001, false, &outgoing);
  const std::vector<kj::byte> reply(4 << 20, 9);  // more than a socket holds
  auto written = pipe.read->write(reply.data(), reply.size());
  CHECK_FALSE(Settled(written, io.waitScope));
  CHECK(outgoing.of(2001) == reply.size());
  pipe.Send(Message(4));
  std::vector<kj::byte> buffer(64);
  auto next_call = pipe.read->tryRead(buffer.data(), 8, 8);
  CHECK_FALSE(Settled(next_call, io.waitScope));  // the call waits in the socket
  // The client reads the whole reply: the write ends, and the call is read.
  std::vector<kj::byte> taken(reply.size());
  pipe.pipe.ends[0]->read(taken.data(), taken.size()).wait(io.waitScope);
  written.wait(io.waitScope);
  CHECK(next_call.wait(io.waitScope) == 8);
  CHECK(outgoing.total() == 0);
}

TEST_CASE("a reply the client does not take within the deadline closes the connection") {
  auto io = kj::setupAsyncIo();
  UnfinishedMessages budget;
  UnfinishedLimits limits = UnsentReplyLimits();
  limits.deadline = 50 * kj::MILLISECONDS;
  UnfinishedMessages outgoing(limits);
  Pipe pipe(io, budget, 2001, false, &outgoing);
  const std::vector<kj::byte> reply(4 << 20, 9);
  auto written = pipe.read->write(reply.data(), reply.size());
  Status late;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] { written.wait(io.waitScope); })) {
    late = rpc_status::FromException(*e);
  }
  CHECK(late.code() == StatusCode::kDeadlineExceeded);
  CHECK(late.message() == "uid 2001: a reply of 4194304 bytes was not read within 50 ms");
  CHECK(outgoing.total() == 0);
  // The client sees the connection end after what the socket held.
  std::vector<kj::byte> buffer(1 << 20);
  size_t got = 0, n = 0;
  while ((n = pipe.pipe.ends[0]->tryRead(buffer.data(), 1, buffer.size()).wait(io.waitScope)) > 0)
    got += n;
  CHECK(got < reply.size());
}

TEST_CASE("unsent replies past a uid's share close its connection; another uid goes on") {
  auto io = kj::setupAsyncIo();
  UnfinishedMessages budget;
  UnfinishedLimits limits = UnsentReplyLimits();
  limits.per_uid_bytes = 5 << 20;
  UnfinishedMessages outgoing(limits);
  Pipe first(io, budget, 2001, false, &outgoing), second(io, budget, 2001, false, &outgoing),
      other(io, budget, 2002, false, &outgoing);
  const std::vector<kj::byte> reply(3 << 20, 9);
  auto pending = first.read->write(reply.data(), reply.size());
  CHECK_FALSE(Settled(pending, io.waitScope));
  Status refused;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions(
                     [&] { second.read->write(reply.data(), reply.size()).wait(io.waitScope); })) {
    refused = rpc_status::FromException(*e);
  }
  CHECK(refused.code() == StatusCode::kResourceExhausted);
  CHECK(refused.message() ==
        "uid 2001: a message of 3145728 bytes on top of 3145728 in unsent replies is over the "
        "limit of 5242880 per user");
  auto others = other.read->write(reply.data(), reply.size());
  CHECK(outgoing.of(2002) == reply.size());
  CHECK(outgoing.total() == 2 * reply.size());
}

}  // namespace
}  // namespace ember::daemon
