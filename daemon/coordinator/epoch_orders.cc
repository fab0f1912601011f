#include "daemon/coordinator/epoch_orders.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace ember::daemon {

using Clock = std::chrono::steady_clock;

EpochOrders::~EpochOrders() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  changed_.SignalAll();
  if (worker_.joinable()) worker_.join();
}

std::vector<uint64_t> EpochOrders::Ids(const OrderKey& key, uint64_t epoch, PositionRange range) {
  std::vector<uint64_t> ids(range.size());
  if (!key.shuffle) {
    std::iota(ids.begin(), ids.end(), range.begin);
    return ids;
  }
  const Stream stream{key.num_samples, key.seed, key.shape};
  std::shared_ptr<const Order> order;
  {
    MutexLock lock(&mu_);
    while (order == nullptr) {
      Epochs& epochs = streams_[stream];
      auto it = epochs.find(epoch);
      if (it == epochs.end()) {
        Reserve(stream, epoch);
        std::shared_ptr<const Order> built;
        {
          MutexUnlock unlocked(&mu_);
          built = Build(stream, epoch);
        }
        ++stats_.built_here;
        Publish(stream, epoch, built);
        order = std::move(built);
      } else if (it->second.order != nullptr) {
        it->second.used = Clock::now();
        order = it->second.order;
      } else {
        changed_.Wait(&mu_);  // being built, here or in the background
      }
    }
    // In the epoch's second half: the next epoch's order, in the background.
    if (2 * range.end >= key.num_samples && streams_[stream].count(epoch + 1) == 0) {
      Reserve(stream, epoch + 1);
      queue_.emplace_back(stream, epoch + 1);
      changed_.SignalAll();
    }
  }
  for (uint64_t i = 0; i < ids.size(); ++i) ids[i] = order->at(range.begin + i);
  return ids;
}

std::vector<uint64_t> EpochOrders::SliceIds(const OrderKey& key, uint64_t epoch,
                                            PositionRange step, PositionRange slice) {
  if (!key.shuffle || !key.shape.by_shards() || key.shape.starts == nullptr ||
      step.begin > slice.begin || step.end < slice.end)
    return Ids(key, epoch, slice);
  std::vector<uint64_t> ids = Ids(key, epoch, step);
  GroupByShard(ids, key.shape);
  return std::vector<uint64_t>(ids.begin() + (slice.begin - step.begin),
                               ids.begin() + (slice.end - step.begin));
}

std::shared_ptr<const EpochOrders::Order> EpochOrders::Build(const Stream& stream, uint64_t epoch) {
  auto order = std::make_shared<Order>();
  const auto [num_samples, seed, shape] = stream;
  if (num_samples <= uint64_t{std::numeric_limits<uint32_t>::max()} + 1)
    MakeEpochOrder(num_samples, seed, epoch, /*shuffle=*/true, &order->narrow, shape);
  else
    MakeEpochOrder(num_samples, seed, epoch, /*shuffle=*/true, &order->wide, shape);
  return order;
}

void EpochOrders::Reserve(const Stream& stream, uint64_t epoch) {
  auto distance = [epoch](uint64_t e) { return e > epoch ? e - epoch : epoch - e; };
  // Of this order, the built epoch farthest from `epoch` (ties: the lower) goes first.
  for (Epochs& epochs = streams_[stream]; epochs.size() >= kKeptPerOrder;) {
    auto victim = epochs.end();
    for (auto it = epochs.begin(); it != epochs.end(); ++it)
      if (it->second.order != nullptr &&
          (victim == epochs.end() || distance(it->first) > distance(victim->first)))
        victim = it;
    if (victim == epochs.end()) break;
    epochs.erase(victim);
  }
  // In all, the least recently used.
  while (HeldLocked() >= kKeptInAll) {
    Epochs* owner = nullptr;
    Epochs::iterator victim;
    for (auto& [s, epochs] : streams_)
      for (auto it = epochs.begin(); it != epochs.end(); ++it)
        if (it->second.order != nullptr && (owner == nullptr || it->second.used < victim->second.used)) {
          owner = &epochs;
          victim = it;
        }
    if (owner == nullptr) break;
    owner->erase(victim);
  }
  streams_[stream][epoch] = Slot{nullptr, Clock::now()};
  if (!worker_.joinable()) worker_ = std::thread([this] { Work(); });
}

void EpochOrders::Publish(const Stream& stream, uint64_t epoch, std::shared_ptr<const Order> order) {
  streams_[stream][epoch] = Slot{std::move(order), Clock::now()};
  changed_.SignalAll();
}

void EpochOrders::DropIdle(Clock::time_point now) {
  for (auto s = streams_.begin(); s != streams_.end();) {
    Epochs& epochs = s->second;
    for (auto it = epochs.begin(); it != epochs.end();) {
      if (it->second.order != nullptr && now - it->second.used >= idle_)
        it = epochs.erase(it);
      else
        ++it;
    }
    s = epochs.empty() ? streams_.erase(s) : std::next(s);
  }
}

size_t EpochOrders::HeldLocked() const {
  size_t held = 0;
  for (const auto& [s, epochs] : streams_) held += epochs.size();
  return held;
}

EpochOrders::Stats EpochOrders::stats() const {
  MutexLock lock(&mu_);
  Stats s = stats_;
  s.held = 0;
  for (const auto& [stream, epochs] : streams_)
    for (const auto& [epoch, slot] : epochs) s.held += slot.order != nullptr ? 1 : 0;
  return s;
}

void EpochOrders::WaitIdle() {
  MutexLock lock(&mu_);
  while (!queue_.empty() || working_) changed_.Wait(&mu_);
}

void EpochOrders::Work() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    if (!queue_.empty()) {
      const auto [stream, epoch] = queue_.front();
      queue_.pop_front();
      working_ = true;
      std::shared_ptr<const Order> built;
      {
        MutexUnlock unlocked(&mu_);
        built = Build(stream, epoch);
      }
      working_ = false;
      ++stats_.built_ahead;
      Publish(stream, epoch, std::move(built));
      continue;
    }
    DropIdle(Clock::now());
    changed_.WaitFor(&mu_, std::min<std::chrono::milliseconds>(idle_, std::chrono::seconds(10)));
  }
}

}  // namespace ember::daemon
