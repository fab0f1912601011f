// The decode rows stream end to end over real mutual TLS on loopback: DecodeRowsServer
// serving a lending PeerService, DecodeRowsChannel reading the rows straight into
// destinations: the bytes a local decode writes, failed rows zeroed and named, refusals
// with their codes, streams kept between calls and replaced when the worker closed them, a
// caller that sends garbage closed without harm, and Cancel() ending a call at once.
#include "daemon/rpc/decode_rows.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/env.h"
#include "common/temp_dir_testing.h"
#include "daemon/decode/decode_lender.h"
#include "daemon/decode/decode_testing.h"
#include "daemon/peer/certs_testing.h"
#include "daemon/peer/peer_wire.h"
#include "daemon/stream/stream_testing.h"

namespace ember::daemon {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point In(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

// A TCP listener on 127.0.0.1:0 that reads each connection's first byte and hands those
// that ask for a decode rows stream to `server`, as the peer listener does.
class Acceptor {
 public:
  explicit Acceptor(DecodeRowsServer& server) : server_(server) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t size = sizeof(address);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) == 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~Acceptor() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  void Run() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      uint8_t kind = 0;
      if (::recv(client, &kind, 1, 0) == 1 && kind == kPeerDecodeRowsKind)
        server_.Serve(kj::AutoCloseFd(client), "127.0.0.1:client");
      else
        ::close(client);
    }
  }
  DecodeRowsServer& server_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A worker (a lender over RowSource, sample 3 bad, behind DecodeRowsServer) and a caller's
// TLS, one CA.
struct Fixture {
  explicit Fixture(const std::string& name, DecodeRowsOptions options = {},
                   DecodeLender::SourceLoader loader = nullptr)
      : dir(FreshTestDir(name)) {
    const TestKeypair ca = MakeTestCa(dir, "ca");
    worker_tls = Load(MakeTestNodeCert(dir, ca, "worker"), ca);
    caller_tls = Load(MakeTestNodeCert(dir, ca, "caller"), ca);
    catalog = RowsCatalog(env.get(), name + "_catalog");
    REQUIRE(catalog != nullptr);
    if (loader == nullptr) loader = [this](const DatasetInfo&) { return Ready(source); };
    lender = std::make_unique<DecodeLender>(catalog.get(), loader, &pool);
    PeerServiceDeps deps;
    deps.node = "worker";
    deps.lender = lender.get();
    service = std::make_unique<PeerService>(deps);
    server = std::make_unique<DecodeRowsServer>(*service, *worker_tls, options);
    acceptor = std::make_unique<Acceptor>(*server);
  }
  ~Fixture() {
    acceptor.reset();
    server->Stop();
  }
  std::unique_ptr<PeerTls> Load(const TestKeypair& node, const TestKeypair& ca) {
    auto tls = PeerTls::Load(*env, node.cert_path, node.key_path, ca.cert_path);
    INFO(tls.status().ToString());
    REQUIRE(tls.ok());
    return std::move(tls).value();
  }
  std::string address() const { return acceptor->address(); }

  std::unique_ptr<Env> env = NewPosixEnv();
  std::string dir;
  std::unique_ptr<PeerTls> worker_tls, caller_tls;
  std::shared_ptr<RowSource> source = std::make_shared<RowSource>(/*parallel=*/true, /*bad=*/3);
  DecodePool pool{2};
  std::unique_ptr<Catalog> catalog;
  std::unique_ptr<DecodeLender> lender;
  std::unique_ptr<PeerService> service;
  std::unique_ptr<DecodeRowsServer> server;
  std::unique_ptr<Acceptor> acceptor;
};

// A request of "data" for `ids`, seed 7, epoch 2.
DecodeRequest Request(std::vector<uint64_t> ids, uint64_t fingerprint = kRowsFingerprint) {
  DecodeRequest request;
  request.dataset = "data";
  request.fingerprint = fingerprint;
  request.seed = 7;
  request.epoch = 2;
  request.ids = std::move(ids);
  return request;
}

// Destinations for RowSource's two tensors (12 and 1 bytes a row) inside one buffer with a
// guard byte around each, so that a write outside them shows.
struct Slot {
  explicit Slot(size_t rows) : rows(rows), bytes(1 + rows * 12 + 1 + rows + 1, 0xee) {}
  RowsDestination Into() { return {{&bytes[1], &bytes[2 + rows * 12]}, {12, 1}}; }
  std::vector<uint8_t> Rows() const {  // tensor-major, as DecodeLocally
    std::vector<uint8_t> out(bytes.begin() + 1, bytes.begin() + 1 + rows * 12);
    out.insert(out.end(), bytes.begin() + 2 + rows * 12, bytes.begin() + 2 + rows * 13);
    return out;
  }
  bool GuardsIntact() const {
    return bytes[0] == 0xee && bytes[1 + rows * 12] == 0xee && bytes.back() == 0xee;
  }
  bool Untouched() const {
    return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0xee; });
  }
  size_t rows;
  std::vector<uint8_t> bytes;
};

TEST_CASE("decode rows: the rows a local decode writes, read into the destination") {
  Fixture f("decode_rows_bytes");
  DecodeRowsChannel channel(*f.caller_tls, f.address());
  const std::vector<uint64_t> ids = {5, 0, 63, 3, 9};
  Slot slot(ids.size());
  auto answer = channel.Decode(Request(ids), slot.Into(), In(5000));
  INFO(answer.status().ToString());
  REQUIRE(answer.ok());
  // Sample 3 (row 3) failed: zeros, and named.
  std::vector<uint8_t> expected = DecodeLocally(*f.source, {5, 0, 63, 0, 9}, {7, 2});
  REQUIRE(expected.size() == 5 * 13);
  std::memset(&expected[3 * 12], 0, 12);
  expected[5 * 12 + 3] = 0;
  CHECK(slot.Rows() == expected);
  CHECK(slot.GuardsIntact());
  CHECK(answer->bytes == 5 * 13);
  REQUIRE(answer->failed.size() == 1);
  CHECK(answer->failed[0].first == 3);
  CHECK(answer->failed[0].second.ToString() ==
        "data_loss: dataset 'data' sample 3: /data/rows.bin: corrupt at byte 42");

  // The stream is kept: the next call uses it.
  CHECK(channel.idle_streams() == 1);
  Slot again(2);
  REQUIRE(channel.Decode(Request({1, 2}), again.Into(), In(5000)).ok());
  CHECK(again.Rows() == DecodeLocally(*f.source, {1, 2}, {7, 2}));
  CHECK(f.server->streams() == 1);
  CHECK(f.lender->stats().requests == 2);

  // Calls side by side use streams of their own.
  std::vector<std::thread> callers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    callers.emplace_back([&] {
      Slot mine(8);
      auto got = channel.Decode(Request({1, 2, 3, 4, 5, 6, 7, 8}), mine.Into(), In(5000));
      if (got.ok() && got->failed.size() == 1) ++ok;
    });
  for (auto& t : callers) t.join();
  CHECK(ok == 4);
  CHECK(channel.idle_streams() >= 1);
}

TEST_CASE("decode rows: refusals keep their codes, write nothing, and keep the stream") {
  Fixture f("decode_rows_refusals");
  DecodeRowsChannel channel(*f.caller_tls, f.address());
  Slot slot(2);
  auto other = channel.Decode(Request({1, 2}, /*fingerprint=*/0x99), slot.Into(), In(5000));
  REQUIRE_FALSE(other.ok());
  CHECK(other.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(other.status().message(), Catch::StartsWith("decode worker " + f.address() + ": "));
  CHECK_THAT(other.status().message(), Catch::Contains("0000000000000099"));
  CHECK(channel.Decode(Request({64}), slot.Into(), In(5000)).status().code() ==
        StatusCode::kInvalidArgument);
  // A caller the calling node reports as privileged is not, from a node not trusted for
  // root: another uid's dataset stays hidden.
  DecodeRequest hidden = Request({1});
  hidden.dataset = "private";
  hidden.caller.privileged = true;
  auto refused = channel.Decode(hidden, slot.Into(), In(5000));
  CHECK(refused.status().code() == StatusCode::kNotFound);
  CHECK_THAT(refused.status().message(), Catch::EndsWith("dataset 'private' not found"));
  CHECK(slot.Untouched());
  CHECK(f.server->streams() == 1);  // one stream for all of them
}

TEST_CASE("decode rows: a daemon that does not lend refuses with the reason") {
  Fixture f("decode_rows_stingy");
  PeerServiceDeps deps;
  deps.node = "worker";
  PeerService stingy(deps);
  DecodeRowsServer server(stingy, *f.worker_tls);
  Acceptor acceptor(server);
  DecodeRowsChannel channel(*f.caller_tls, acceptor.address());
  Slot slot(1);
  auto off = channel.Decode(Request({1}), slot.Into(), In(5000));
  CHECK(off.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(off.status().message(),
             Catch::EndsWith("node 'worker' does not lend its decode pool (config lend_decode)"));
}

TEST_CASE("decode rows: a kept stream the worker closed is replaced; a worker gone fails") {
  DecodeRowsOptions quick;
  quick.idle_timeout = std::chrono::milliseconds(300);
  Fixture f("decode_rows_idle", quick);
  // The caller keeps streams longer than the worker does (as with another config).
  DecodeRowsChannel channel(*f.caller_tls, f.address());
  Slot slot(1);
  REQUIRE(channel.Decode(Request({1}), slot.Into(), In(5000)).ok());
  REQUIRE(channel.idle_streams() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK(f.server->streams() == 0);
  auto again = channel.Decode(Request({2}), slot.Into(), In(5000));
  INFO(again.status().ToString());
  CHECK(again.ok());

  const std::string address = f.address();
  f.acceptor.reset();
  f.server->Stop();
  auto gone = channel.Decode(Request({2}), slot.Into(), In(5000));
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(gone.status().message(), Catch::Contains(address));
}

TEST_CASE("decode rows: a frame that is not a request closes its stream; the worker serves on") {
  Fixture f("decode_rows_garbage");
  // A stream opened by hand: TCP, the kind byte, TLS, the acceptance.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(std::stoi(f.address().substr(10))));
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  const uint8_t kind = kPeerDecodeRowsKind;
  REQUIRE(::send(fd, &kind, 1, MSG_NOSIGNAL) == 1);
  auto socket = TlsSocket::Connect(*f.caller_tls, fd, "127.0.0.1", In(5000));
  INFO(socket.status().ToString());
  REQUIRE(socket.ok());
  uint8_t accepted = 0;
  REQUIRE((*socket)->Read(&accepted, 1, In(5000)).ok());
  CHECK(accepted == kPeerAcceptedByte);
  // A frame announcing 2 GiB: past what a request may be.
  const uint32_t huge = 0x7ffffff8;
  REQUIRE((*socket)->Write(&huge, sizeof(huge), In(5000)).ok());
  uint8_t byte = 0;
  Result<bool> read = (*socket)->Read(&byte, 1, In(5000));
  CHECK((!read.ok() || !*read));  // closed by the worker, not left hanging
  DecodeRowsChannel channel(*f.caller_tls, f.address());
  Slot slot(1);
  CHECK(channel.Decode(Request({1}), slot.Into(), In(5000)).ok());
}

TEST_CASE("decode rows: Cancel() ends a call waiting for its answer at once") {
  // A dataset that never loads: the worker's answer never comes.
  std::promise<Result<std::shared_ptr<const Source>>> never;
  DatasetCache::SourceFuture pending = never.get_future().share();
  Fixture f("decode_rows_cancel", {}, [pending](const DatasetInfo&) { return pending; });
  DecodeRowsChannel channel(*f.caller_tls, f.address());
  Slot slot(1);
  std::thread cancel([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    channel.Cancel();
  });
  const auto began = Clock::now();
  auto answer = channel.Decode(Request({1}), slot.Into(), In(10000));
  cancel.join();
  CHECK(answer.status().code() == StatusCode::kCancelled);
  CHECK(Clock::now() - began < std::chrono::seconds(3));
  CHECK(slot.Untouched());
  CHECK(channel.Decode(Request({1}), slot.Into(), In(1000)).status().code() ==
        StatusCode::kCancelled);
  never.set_value(Unavailable("never mind"));
}

}  // namespace
}  // namespace ember::daemon
