#include "daemon/service/local_peer_channel.h"

#include <map>
#include <utility>

namespace ember::daemon {

// One connection: a session at the coordinator and the ranks joined on it. Unreachable
// connections have no session.
struct LocalPeerChannel::Connection {
  uint64_t generation = 0;
  std::unique_ptr<PeerSession> session;
  std::map<uint64_t, std::unique_ptr<PeerRank>> ranks;  // by membership id
  uint64_t next_id = 0;
};

// Ends the rank's membership on its connection, if that is still up.
class LocalPeerChannel::LocalMembership final : public CoordinatorChannel::Membership {
 public:
  LocalMembership(std::weak_ptr<Connection> connection, uint64_t id)
      : connection_(std::move(connection)), id_(id) {}
  ~LocalMembership() override {
    if (std::shared_ptr<Connection> connection = connection_.lock())
      connection->ranks.erase(id_);
  }

 private:
  const std::weak_ptr<Connection> connection_;
  const uint64_t id_;
};

uint64_t LocalPeerChannel::Connect() {
  if (live_) return live_->generation;
  live_ = std::make_shared<Connection>();
  live_->generation = ++generation_;
  ++traffic_.connections;
  if (unreachable_) {
    error_ = "connect: Connection refused (the coordinator is unreachable)";
  } else {
    live_->session = std::make_unique<PeerSession>(service_, "local#" +
                                                                 std::to_string(generation_));
    error_ = "the connection it joined on ended";
  }
  return live_->generation;
}

void LocalPeerChannel::Reset() { live_.reset(); }

void LocalPeerChannel::Drop() {
  if (!live_) return;
  live_.reset();
  error_ = "the connection ended";
}

std::unique_ptr<CoordinatorChannel::Membership> LocalPeerChannel::Join(const PeerJoin& join) {
  Connect();
  const uint64_t id = live_->next_id++;
  if (live_->session) {
    // A refusal is remembered by the session and answers the rank's exchange entries.
    Result<std::unique_ptr<PeerRank>> rank = live_->session->Join(join);
    if (rank.ok()) live_->ranks[id] = std::move(rank).value();
  }
  return std::make_unique<LocalMembership>(live_, id);
}

kj::Promise<Result<ExchangeAnswer>> LocalPeerChannel::Exchange(const std::string& job,
                                                               std::vector<RankBatch> commits,
                                                               std::vector<RankWant> wants) {
  Connect();
  std::weak_ptr<Connection> sent_on = live_;
  // Served on a later turn of the loop, as an answer from a socket would be.
  return kj::evalLater([this, sent_on, job, commits = std::move(commits),
                        wants = std::move(wants)]() -> kj::Promise<Result<ExchangeAnswer>> {
    std::shared_ptr<Connection> connection = sent_on.lock();
    if (!connection || !connection->session)
      return Result<ExchangeAnswer>(Unavailable(error_));
    Result<ExchangeAnswer> answer = connection->session->Exchange(job, commits, wants);
    ++exchanges_;
    if (lose_next_answer_) {
      lose_next_answer_ = false;
      if (live_ == connection) Drop();
      return Result<ExchangeAnswer>(Unavailable(error_));
    }
    if (silent_) return kj::NEVER_DONE;
    return answer;
  });
}

}  // namespace ember::daemon
