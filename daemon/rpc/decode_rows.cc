#include "daemon/rpc/decode_rows.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <utility>

#include "common/rpc_status.h"
#include "daemon/peer/host_port.h"
#include "daemon/peer/peer_wire.h"
#include "daemon/rpc/peer_convert.h"
#include "schemas/peer.capnp.h"

namespace ember::daemon {

namespace {

using Clock = std::chrono::steady_clock;

// A request holds at most 1024 ids and a few names; an answer at most 1024 failed rows,
// each with its message.
constexpr uint32_t kMaxRequestBytes = 512 * 1024;
constexpr uint32_t kMaxAnswerBytes = 8 * 1024 * 1024;

capnp::ReaderOptions Limits(uint32_t bytes) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = bytes / sizeof(capnp::word);
  return options;
}

std::string Ms(std::chrono::milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

// A frame of `message`: its byte count (little-endian uint32), then the flat message.
kj::Array<capnp::word> Frame(capnp::MessageBuilder& message) {
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  kj::Array<capnp::word> frame = kj::heapArray<capnp::word>(flat.size() + 1);
  const uint32_t bytes = static_cast<uint32_t>(flat.size() * sizeof(capnp::word));
  std::memset(frame.begin(), 0, sizeof(capnp::word));
  // The count takes the first 4 bytes of a word of its own, so the message stays aligned;
  // the frame written starts 4 bytes in.
  std::memcpy(reinterpret_cast<kj::byte*>(frame.begin()) + 4, &bytes, 4);
  std::memcpy(frame.begin() + 1, flat.begin(), flat.size() * sizeof(capnp::word));
  return frame;
}

Status WriteFrame(TlsSocket& socket, const kj::Array<capnp::word>& frame,
                  Clock::time_point deadline) {
  const kj::byte* bytes = reinterpret_cast<const kj::byte*>(frame.begin()) + 4;
  return socket.Write(bytes, frame.size() * sizeof(capnp::word) - 4, deadline);
}

// Reads a frame's message of at most `limit` bytes, its first bytes by `first_by` and the
// rest within `rest_within` of them (zero: by first_by too): false when the stream ended
// cleanly before it.
Result<bool> ReadFrame(TlsSocket& socket, uint32_t limit, Clock::time_point first_by,
                       Clock::duration rest_within, kj::Array<capnp::word>& words) {
  uint32_t bytes = 0;
  EMBER_ASSIGN_OR_RETURN(bool got, socket.Read(&bytes, sizeof(bytes), first_by));
  const Clock::time_point rest_by =
      rest_within == Clock::duration::zero() ? first_by : Clock::now() + rest_within;
  if (!got) return false;
  if (bytes == 0 || bytes % sizeof(capnp::word) != 0 || bytes > limit)
    return InvalidArgument("a frame of " + std::to_string(bytes) +
                           " bytes (a whole number of 8-byte words up to " +
                           std::to_string(limit) + " expected)");
  words = kj::heapArray<capnp::word>(bytes / sizeof(capnp::word));
  EMBER_ASSIGN_OR_RETURN(got, socket.Read(words.begin(), bytes, rest_by));
  if (!got) return Unavailable("the stream ended inside a frame");
  return true;
}

// Runs `parse` (Cap'n Proto readers throw on malformed input) into a Status.
template <typename F>
Status Parse(F&& parse) {
  KJ_IF_MAYBE(e, kj::runCatchingExceptions(parse)) {
    return InvalidArgument(std::string("malformed message: ") + e->getDescription().cStr());
  }
  return Status::Ok();
}

}  // namespace

DecodeRowsServer::DecodeRowsServer(const PeerService& service, PeerTls& tls,
                                   DecodeRowsOptions options)
    : service_(service), tls_(tls), options_(options) {}

DecodeRowsServer::~DecodeRowsServer() { Stop(); }

size_t DecodeRowsServer::streams() const {
  MutexLock lock(&mu_);
  size_t open = 0;
  for (const auto& [id, served] : served_) open += served.done ? 0 : 1;
  return open;
}

void DecodeRowsServer::Reap() {
  for (auto it = served_.begin(); it != served_.end();) {
    if (!it->second.done) {
      ++it;
      continue;
    }
    it->second.thread.join();  // it has returned: at once
    it = served_.erase(it);
  }
}

void DecodeRowsServer::Serve(kj::AutoCloseFd socket, const std::string& address) {
  MutexLock lock(&mu_);
  Reap();
  if (stopping_ || served_.size() >= options_.max_streams) {
    spdlog::warn("refused decode rows stream of peer {}: {}", address,
                 stopping_ ? std::string("emberd is stopping")
                           : std::to_string(served_.size()) + " streams are served already, at most " +
                                 std::to_string(options_.max_streams));
    return;  // `socket` closes
  }
  const uint64_t id = next_id_++;
  Served& served = served_[id];
  served.fd = socket.release();
  served.thread = std::thread([this, id, fd = served.fd, address] { Run(id, fd, address); });
}

void DecodeRowsServer::Stop() {
  std::map<uint64_t, Served> served;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    // Each thread's calls fail at once; it closes its socket when it ends.
    for (auto& [id, s] : served_) ::shutdown(s.fd, SHUT_RDWR);
    served.swap(served_);
  }
  for (auto& [id, s] : served) s.thread.join();
}

void DecodeRowsServer::Run(uint64_t id, int fd, std::string address) {
  auto warn = [&address](const Status& why) {
    if (why.code() != StatusCode::kCancelled)
      spdlog::warn("decode rows stream of peer {} closed: {}", address, why.ToString());
  };
  // The TLS socket takes a duplicate: `fd` stays open (for Stop's shutdown) until the end.
  const int duplicate = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  Result<std::unique_ptr<TlsSocket>> socket =
      duplicate < 0 ? Result<std::unique_ptr<TlsSocket>>(
                          Unavailable(std::string("dup: ") + std::strerror(errno)))
                    : TlsSocket::Accept(tls_, duplicate, Clock::now() + options_.handshake_timeout);
  if (!socket.ok()) {
    spdlog::warn("refused decode rows stream of peer {}: {}", address, socket.status().ToString());
  } else {
    TlsSocket& tls = **socket;
    const std::string node = tls.peer_common_name();
    static constexpr uint8_t kAccepted = kPeerAcceptedByte;
    Status status = tls.Write(&kAccepted, 1, Clock::now() + options_.handshake_timeout);
    // The previous answer's rows: the next request's memory.
    std::vector<uint8_t> buffer;
    while (status.ok()) {
      kj::Array<capnp::word> words;
      Result<bool> got = ReadFrame(tls, kMaxRequestBytes, Clock::now() + options_.idle_timeout,
                                   options_.handshake_timeout, words);
      if (!got.ok()) {
        status = got.status().code() == StatusCode::kDeadlineExceeded
                     ? Status::Ok()  // idle: closed quietly, the caller opens another
                     : got.status();
        break;
      }
      if (!*got) break;  // the caller closed it
      DecodeRequest request;
      status = Parse([&] {
        capnp::FlatArrayMessageReader reader(words, Limits(kMaxRequestBytes));
        request = peer_wire::FromRpc(reader.getRoot<rpc::DecodeRequest>());
      });
      if (!status.ok()) break;
      auto answered = std::make_shared<std::promise<Result<DecodedRows>>>();
      std::future<Result<DecodedRows>> answer = answered->get_future();
      service_.Decode(
          node, std::move(request),
          [answered](Result<DecodedRows> rows) { answered->set_value(std::move(rows)); },
          std::move(buffer));
      if (answer.wait_for(options_.answer_timeout) != std::future_status::ready) {
        status = DeadlineExceeded("a request not decoded within " + Ms(options_.answer_timeout));
        break;
      }
      Result<DecodedRows> rows = answer.get();
      capnp::MallocMessageBuilder message;
      auto root = message.initRoot<rpc::DecodeAnswer>();
      if (rows.ok()) {
        root.setRowBytes(rows->bytes.size());
        auto failed = root.initFailed(static_cast<unsigned>(rows->failed.size()));
        for (size_t i = 0; i < rows->failed.size(); ++i) {
          failed[i].setRow(rows->failed[i].first);
          failed[i].setError(rows->failed[i].second.ToString());
        }
      } else {
        root.setError(rows.status().ToString());
      }
      // A request's answer may take a while to send to a busy caller, not forever.
      const Clock::time_point deadline = Clock::now() + options_.answer_timeout;
      status = WriteFrame(tls, Frame(message), deadline);
      if (status.ok() && rows.ok() && !rows->bytes.empty())
        status = tls.Write(rows->bytes.data(), rows->bytes.size(), deadline);
      if (rows.ok()) buffer = std::move(rows->bytes);
    }
    if (!status.ok()) warn(status);
  }
  MutexLock lock(&mu_);
  ::close(fd);  // under the lock: Stop() never shuts down a number reused meanwhile
  auto it = served_.find(id);
  if (it == served_.end()) return;  // Stop() took it, and joins this thread
  it->second.fd = -1;
  it->second.done = true;
}

DecodeRowsChannel::DecodeRowsChannel(PeerTls& tls, std::string address, DecodeRowsOptions options)
    : tls_(tls), address_(std::move(address)), options_(options) {}

DecodeRowsChannel::~DecodeRowsChannel() = default;

size_t DecodeRowsChannel::idle_streams() const {
  MutexLock lock(&mu_);
  return idle_.size();
}

void DecodeRowsChannel::Cancel() {
  std::vector<Idle> idle;
  MutexLock lock(&mu_);
  cancelled_ = true;
  for (TlsSocket* socket : busy_) socket->Cancel();
  idle.swap(idle_);
}

std::unique_ptr<TlsSocket> DecodeRowsChannel::TakeIdle() {
  MutexLock lock(&mu_);
  // A stream idle for half the worker's idle timeout may be closing: not reused.
  const Clock::time_point stale = Clock::now() - options_.idle_timeout / 2;
  while (!idle_.empty()) {
    Idle last = std::move(idle_.back());
    idle_.pop_back();
    if (last.since > stale) return std::move(last.socket);
  }
  return nullptr;
}

void DecodeRowsChannel::Keep(std::unique_ptr<TlsSocket> socket) {
  MutexLock lock(&mu_);
  if (!cancelled_ && idle_.size() < options_.max_idle_streams)
    idle_.push_back({std::move(socket), Clock::now()});
}

Result<std::unique_ptr<TlsSocket>> DecodeRowsChannel::Open(Clock::time_point deadline) {
  deadline = std::min(deadline, Clock::now() + options_.handshake_timeout);
  EMBER_ASSIGN_OR_RETURN(HostPort where, ParseHostPort(address_));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(where.port);
  if (const int error = getaddrinfo(where.host.c_str(), port.c_str(), &hints, &found); error != 0)
    return Unavailable("cannot resolve the host: " + std::string(gai_strerror(error)));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  kj::AutoCloseFd fd(::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                              found->ai_protocol));
  if (fd.get() < 0) return Unavailable(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  (void)setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (::connect(fd.get(), found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS)
    return Unavailable("TCP connect failed: " + std::string(std::strerror(errno)));
  // Connected when writable; in slices, so that Cancel() is seen.
  while (true) {
    {
      MutexLock lock(&mu_);
      if (cancelled_) return Cancelled("emberd is shutting down");
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return DeadlineExceeded("TCP connect not done within " + Ms(options_.handshake_timeout));
    pollfd p{fd.get(), POLLOUT, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
    if (ready < 0 && errno != EINTR) return Unavailable(std::string("poll: ") + std::strerror(errno));
    if (ready <= 0) continue;
    int error = 0;
    socklen_t size = sizeof(error);
    (void)getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &size);
    if (error != 0) return Unavailable("TCP connect failed: " + std::string(std::strerror(error)));
    break;
  }
  const uint8_t kind = kPeerDecodeRowsKind;
  if (::send(fd.get(), &kind, 1, MSG_NOSIGNAL) != 1)
    return Unavailable("sending the stream kind failed: " + std::string(std::strerror(errno)));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<TlsSocket> socket,
                         TlsSocket::Connect(tls_, fd.release(), where.host, deadline));
  // Refused by the worker (its check of this node's certificate comes after the handshake
  // with TLS 1.3): its alert shows here.
  uint8_t accepted = 0;
  EMBER_ASSIGN_OR_RETURN(bool got, socket->Read(&accepted, 1, deadline));
  if (!got) return Unavailable("the worker closed the stream without accepting it");
  if (accepted != kPeerAcceptedByte)
    return FailedPrecondition("its first byte is " + std::to_string(accepted) +
                              ", not the accepted byte: not an emberd peer endpoint?");
  return socket;
}

Result<RemoteAnswer> DecodeRowsChannel::Decode(const DecodeRequest& request,
                                               const RowsDestination& into,
                                               Clock::time_point deadline) {
  kj::Array<capnp::word> frame;
  {
    capnp::MallocMessageBuilder message;
    peer_wire::ToRpc(request, message.initRoot<rpc::DecodeRequest>());
    frame = Frame(message);
  }
  for (int attempt = 0;; ++attempt) {
    {
      MutexLock lock(&mu_);
      if (cancelled_) return Cancelled("decode worker " + address_ + ": emberd is shutting down");
    }
    std::unique_ptr<TlsSocket> socket = attempt == 0 ? TakeIdle() : nullptr;
    const bool reused = socket != nullptr;
    if (!reused) {
      Result<std::unique_ptr<TlsSocket>> opened = Open(deadline);
      if (!opened.ok()) return opened.status().WithContext("decode worker " + address_);
      socket = std::move(opened).value();
    }
    {
      MutexLock lock(&mu_);
      if (cancelled_) return Cancelled("decode worker " + address_ + ": emberd is shutting down");
      busy_.push_back(socket.get());
    }
    Progress progress = Progress::kNothing;
    Result<RemoteAnswer> answer =
        Exchange(*socket, frame, into, request.ids.size(), deadline, progress);
    {
      MutexLock lock(&mu_);
      busy_.erase(std::find(busy_.begin(), busy_.end(), socket.get()));
    }
    if (progress == Progress::kInStep) Keep(std::move(socket));
    // A kept stream the worker closed meanwhile (idle, or it restarted): once more on a new one.
    if (!answer.ok() && reused && progress == Progress::kNothing &&
        answer.status().code() == StatusCode::kUnavailable)
      continue;
    if (!answer.ok()) return answer.status().WithContext("decode worker " + address_);
    return answer;
  }
}

Result<RemoteAnswer> DecodeRowsChannel::Exchange(TlsSocket& socket,
                                                 const kj::Array<capnp::word>& request,
                                                 const RowsDestination& into, uint64_t rows,
                                                 Clock::time_point deadline, Progress& progress) {
  EMBER_RETURN_IF_ERROR(WriteFrame(socket, request, deadline));
  kj::Array<capnp::word> words;
  EMBER_ASSIGN_OR_RETURN(bool got, ReadFrame(socket, kMaxAnswerBytes, deadline,
                                             Clock::duration::zero(), words));
  if (!got) return Unavailable("the worker closed the stream");
  progress = Progress::kAnswered;
  RemoteAnswer answer;
  std::string error;
  uint64_t row_bytes = 0;
  Status parsed = Parse([&] {
    capnp::FlatArrayMessageReader reader(words, Limits(kMaxAnswerBytes));
    const auto root = reader.getRoot<rpc::DecodeAnswer>();
    error = root.getError();
    row_bytes = root.getRowBytes();
    for (auto failed : root.getFailed())
      answer.failed.emplace_back(failed.getRow(), rpc_status::FromDescription(failed.getError()));
  });
  // A worker that breaks the protocol: the stream is dropped (kDataLoss).
  if (!parsed.ok()) return DataLoss("its answer: " + parsed.message());
  if (!error.empty()) {
    progress = Progress::kInStep;  // a refusal: no rows follow
    return rpc_status::FromDescription(error);
  }
  const uint64_t expected = into.Bytes(rows);
  if (row_bytes != expected)
    return DataLoss("it announced " + std::to_string(row_bytes) + " bytes of rows for " +
                    std::to_string(rows) + " samples, not " + std::to_string(expected));
  for (const auto& [row, status] : answer.failed)
    if (row >= rows)
      return DataLoss("it named failed row " + std::to_string(row) + " of a request of " +
                      std::to_string(rows));
  for (size_t t = 0; t < into.tensors.size(); ++t) {
    const uint64_t bytes = rows * into.row_bytes[t];
    if (bytes == 0) continue;
    EMBER_ASSIGN_OR_RETURN(got, socket.Read(into.tensors[t], bytes, deadline));
    if (!got) return Unavailable("the stream ended before the rows");
  }
  answer.bytes = expected;
  progress = Progress::kInStep;
  return answer;
}

}  // namespace ember::daemon
