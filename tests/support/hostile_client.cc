#include "tests/support/hostile_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include <cerrno>
#include <cstring>

#include "schemas/ember.capnp.h"

namespace ember::testing {
namespace {

// A client's end that writes what the RPC system sends and never reads a reply.
class NeverReads final : public kj::AsyncIoStream {
 public:
  explicit NeverReads(kj::AsyncIoStream& inner) : inner_(inner) {}
  kj::Promise<size_t> tryRead(void*, size_t, size_t) override { return kj::NEVER_DONE; }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    return inner_.write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return inner_.write(pieces);
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_.whenWriteDisconnected(); }
  void shutdownWrite() override { inner_.shutdownWrite(); }

 private:
  kj::AsyncIoStream& inner_;
};

}  // namespace

int ConnectRaw(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string SendCallsNeverReadReplies(const std::string& socket, const std::string& job,
                                      uint32_t value_bytes, int gets,
                                      std::chrono::milliseconds settle,
                                      const std::function<void()>& while_held) {
  auto io = kj::setupAsyncIo();
  const int fd = ConnectRaw(socket);
  if (fd < 0) return "connect failed";
  auto connection =
      io.lowLevelProvider->wrapSocketFd(fd, kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP);
  NeverReads deaf(*connection);
  capnp::TwoPartyClient client(deaf);
  auto join = client.bootstrap().castAs<rpc::Daemon>().joinJobRequest();
  join.setJob(job);
  auto member = join.send().getJob();
  kj::Vector<kj::Promise<void>> calls;
  auto set = member.kvSetRequest();
  set.setKey("v");
  set.initValue(value_bytes);
  calls.add(set.send().ignoreResult());
  for (int i = 0; i < gets; ++i) {
    auto get = member.kvGetRequest();
    get.setKey("v");
    calls.add(get.send().ignoreResult());
  }
  io.provider->getTimer().afterDelay(settle.count() * kj::MILLISECONDS).wait(io.waitScope);
  while_held();
  return "";
}

std::vector<int> SendHalfMessages(const std::string& socket, int count, uint32_t announced,
                                  uint32_t sent) {
  std::vector<int> fds;
  const std::string body(sent, 'x');
  for (int i = 0; i < count; ++i) {
    const int fd = ConnectRaw(socket);
    fds.push_back(fd);
    if (fd < 0) continue;
    unsigned char header[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const uint32_t words = announced / 8;
    for (int b = 0; b < 4; ++b) header[4 + b] = static_cast<unsigned char>(words >> (8 * b));
    if (send(fd, header, sizeof(header), MSG_NOSIGNAL) != 8) continue;
    size_t done = 0;
    while (done < body.size()) {
      const ssize_t n = send(fd, body.data() + done, body.size() - done, MSG_NOSIGNAL);
      if (n <= 0) break;  // closed by the daemon
      done += static_cast<size_t>(n);
    }
  }
  return fds;
}

int CountClosed(const std::vector<int>& fds) {
  int closed = 0;
  for (int fd : fds) {
    if (fd < 0) continue;
    char c;
    const ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) ++closed;
  }
  return closed;
}

}  // namespace ember::testing
