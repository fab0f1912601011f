#include "daemon/stream/share_group.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <numeric>

#include "daemon/coordinator/epoch_plan.h"

namespace ember::daemon {
namespace {

// Tensors whose rows are smaller go into the slots by copy: a region must be whole pages,
// and rows of a few bytes would need thousands of them per ring.
constexpr uint64_t kMaxRowsPerPageRun = 64;
constexpr size_t kKeptOrders = 3;
constexpr size_t kMaxRuns = 4096;
constexpr size_t kMaxJobStarts = 1024;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

Result<std::shared_ptr<ShareGroup>> ShareGroup::Create(Env& env, const DatasetInfo& info,
                                                       DecodePool* pool, Params params) {
  if (info.tensors.empty() || info.tensors.size() > ring::kMaxTensors)
    return InvalidArgument("share group '" + params.name + "': dataset '" + info.spec.name +
                           "' has " + std::to_string(info.tensors.size()) + " tensors");
  if (info.count == 0)
    return InvalidArgument("share group '" + params.name + "': dataset '" + info.spec.name +
                           "' is empty");
  const uint64_t page = PageSize();
  // Rows per whole number of pages, for each shared tensor: the capacity is a multiple
  // of all of them.
  uint64_t multiple = 1;
  std::vector<TensorRing> tensors(info.tensors.size());
  for (size_t t = 0; t < info.tensors.size(); ++t) {
    tensors[t].row_bytes = info.tensors[t].SampleBytes();
    const uint64_t rows_per_run = page / std::gcd(tensors[t].row_bytes, page);
    if (tensors[t].row_bytes >= page && rows_per_run <= kMaxRowsPerPageRun) {
      tensors[t].region = 1;  // numbered below
      multiple = std::lcm(multiple, rows_per_run);
    }
  }
  const uint64_t capacity =
      std::max<uint64_t>(multiple, (std::max<uint64_t>(params.rows, 2) + multiple - 1) /
                                       multiple * multiple);
  std::vector<ring::SharedRegion> regions;
  uint64_t offset = 0;
  for (TensorRing& t : tensors) {
    t.offset = offset;
    const uint64_t bytes = ring::AlignUp(capacity * t.row_bytes, page);
    if (t.region != 0) {
      regions.push_back({offset, bytes});
      t.region = static_cast<uint32_t>(regions.size());
    }
    offset += bytes;
  }
  std::string memfd_name = "ember-share-" + params.name;
  if (memfd_name.size() > 200) memfd_name.resize(200);
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<SharedMemory> shm,
                         env.CreateWriteSealedSharedMemory(memfd_name, offset));
  return std::shared_ptr<ShareGroup>(new ShareGroup(info, pool, std::move(params), capacity,
                                                    std::move(tensors), std::move(regions),
                                                    std::move(shm)));
}

ShareGroup::ShareGroup(const DatasetInfo& info, DecodePool* pool, Params params,
                       uint64_t capacity, std::vector<TensorRing> tensors,
                       std::vector<ring::SharedRegion> regions, std::unique_ptr<SharedMemory> shm)
    : params_(std::move(params)),
      dataset_(info.spec.name),
      count_(info.count),
      fingerprint_(info.fingerprint),
      pool_(pool),
      capacity_(capacity),
      tensors_(std::move(tensors)),
      regions_(std::move(regions)),
      shm_(std::move(shm)),
      row_at_(capacity, 0),
      state_(capacity, RowState::kEmpty) {}

ShareGroup::~ShareGroup() {
  MutexLock lock(&mu_);
  closing_ = true;
  queue_.clear();
  while (tasks_ != 0) changed_.Wait(&mu_);
}

const uint8_t* ShareGroup::Row(size_t t, uint64_t position) const {
  return static_cast<const uint8_t*>(shm_->data()) + tensors_[t].offset +
         (position % capacity_) * tensors_[t].row_bytes;
}

void ShareGroup::SetSource(std::shared_ptr<const Source> source) {
  MutexLock lock(&mu_);
  if (source_ == nullptr) source_ = std::move(source);
  AssignLocked();
}

ShareGroup::MemberId ShareGroup::Join(const RingWriter* ring, uint64_t first_row,
                                      uint64_t end_row) {
  MutexLock lock(&mu_);
  const MemberId id = next_member_++;
  Member& m = members_[id];
  m.ring = ring;
  m.end_row = end_row;
  m.want_begin = first_row;
  m.want_end = first_row + 1;
  return id;
}

void ShareGroup::Leave(MemberId member) {
  MutexLock lock(&mu_);
  members_.erase(member);
  changed_.SignalAll();
}

void ShareGroup::Want(MemberId member, uint64_t begin, uint64_t end) {
  MutexLock lock(&mu_);
  auto it = members_.find(member);
  if (it == members_.end()) return;
  it->second.want_begin = begin;
  it->second.want_end = end;
  AssignLocked();
}

std::optional<uint64_t> ShareGroup::Take(MemberId member, uint32_t slot, uint64_t begin,
                                         uint64_t end, const std::atomic<bool>& stop,
                                         uint64_t deadline_ms) {
  if (end <= begin || end - begin > capacity_) return std::nullopt;
  MutexLock lock(&mu_);
  auto idle_since = std::chrono::steady_clock::now();
  uint64_t seen_decoded = rows_decoded_;
  while (!stop.load(std::memory_order_relaxed) && !closing_) {
    auto it = members_.find(member);
    if (it == members_.end()) return std::nullopt;
    AssignLocked();
    bool wait = false;
    std::optional<uint64_t> first;
    for (uint64_t row = begin; row < end && !wait; ++row) {
      if (row >= next_row_) {
        wait = true;
        break;
      }
      const std::optional<uint64_t> at = PositionOfLocked(row);
      if (!at) return std::nullopt;  // written over
      if (first && *at != (*first + (row - begin)) % capacity_) return std::nullopt;
      if (!first) first = at;
      switch (state_[*at]) {
        case RowState::kDecoding: wait = true; break;
        case RowState::kReady: break;
        default: return std::nullopt;  // failed: the member's own decode names the error
      }
    }
    if (!wait) {
      it->second.pins[slot] = Pin{*first, end - begin, false};
      return first;
    }
    if (rows_decoded_ != seen_decoded) {
      seen_decoded = rows_decoded_;
      idle_since = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - idle_since >
               std::chrono::milliseconds(deadline_ms)) {
      return std::nullopt;
    }
    // Woken by decoded rows; the timeout also catches slots the readers freed (pins).
    waiting_ends_.push_back(end);
    (void)changed_.WaitFor(&mu_, std::chrono::milliseconds(20));
    waiting_ends_.erase(std::find(waiting_ends_.begin(), waiting_ends_.end(), end));
  }
  return std::nullopt;
}

void ShareGroup::Published(MemberId member, uint32_t slot) {
  MutexLock lock(&mu_);
  auto it = members_.find(member);
  if (it == members_.end()) return;
  auto pin = it->second.pins.find(slot);
  if (pin != it->second.pins.end()) pin->second.published = true;
}

void ShareGroup::Unpin(MemberId member, uint32_t slot) {
  MutexLock lock(&mu_);
  auto it = members_.find(member);
  if (it != members_.end()) it->second.pins.erase(slot);
}

uint64_t ShareGroup::StartEpochFor(const std::string& job) {
  MutexLock lock(&mu_);
  if (auto it = job_starts_.find(job); it != job_starts_.end()) return it->second;
  uint64_t epoch = 0;
  if (started_) epoch = (FirstHeldRowLocked() + count_ - 1) / count_;
  if (job_starts_.size() >= kMaxJobStarts) job_starts_.erase(job_starts_.begin());
  job_starts_[job] = epoch;
  return epoch;
}

uint64_t ShareGroup::FirstHeldRowLocked() const {
  if (!started_) return 0;
  uint64_t first = next_row_;
  for (uint64_t p = 0; p < capacity_; ++p)
    if (row_at_[p] != 0) first = std::min(first, row_at_[p] - 1);
  return first;
}

ShareGroup::Stats ShareGroup::stats() const {
  MutexLock lock(&mu_);
  return Stats{rows_decoded_, rows_failed_, static_cast<uint32_t>(members_.size())};
}

bool ShareGroup::PinnedLocked(uint64_t position) {
  for (auto& [id, m] : members_) {
    for (auto it = m.pins.begin(); it != m.pins.end();) {
      const Pin& pin = it->second;
      if (pin.published && m.ring->SlotFree(it->first)) {  // the reader is done with it
        it = m.pins.erase(it);
        continue;
      }
      if ((position + capacity_ - pin.position) % capacity_ < pin.rows) return true;
      ++it;
    }
  }
  return false;
}

std::optional<uint64_t> ShareGroup::PositionOfLocked(uint64_t row) const {
  auto it = runs_.upper_bound(row);
  if (it == runs_.begin()) return std::nullopt;
  --it;
  const uint64_t position = (it->second + (row - it->first)) % capacity_;
  if (row_at_[position] != row + 1) return std::nullopt;
  return position;
}

uint64_t ShareGroup::SampleOfLocked(uint64_t row) {
  const uint64_t epoch = row / count_, position = row % count_;
  if (!params_.shuffle) return position;
  auto it = orders_.find(epoch);
  if (it == orders_.end()) {
    if (orders_.size() >= kKeptOrders) orders_.erase(orders_.begin());
    it = orders_.emplace(epoch, std::vector<uint64_t>()).first;
    MakeEpochOrder(count_, params_.seed, epoch, params_.shuffle, &it->second);
  }
  return it->second[position];
}

uint64_t ShareGroup::KeepFromLocked(Member** slowest) {
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  *slowest = nullptr;
  for (auto& [id, m] : members_) {
    if (m.want_end <= m.want_begin || m.want_begin > next_row_) continue;  // waits ahead
    if (m.let_go) {
      // Waited for again once it moved on and its next rows are still held.
      if (m.want_begin <= m.let_go_at || !PositionOfLocked(m.want_begin)) continue;
      m.let_go = false;
    }
    if (m.want_begin < keep) {
      keep = m.want_begin;
      *slowest = &m;
    }
  }
  return keep;
}

void ShareGroup::AssignLocked() {
  if (source_ == nullptr || closing_) return;
  // Members near the last row handed out drive the group; when there are none, it jumps
  // to the nearest row wanted.
  uint64_t demand_end = 0, nearest = std::numeric_limits<uint64_t>::max();
  for (const auto& [id, m] : members_) {
    if (m.want_end <= m.want_begin) continue;
    if (m.want_end > next_row_) nearest = std::min(nearest, std::max(m.want_begin, next_row_));
    if (m.want_begin <= next_row_ + capacity_) demand_end = std::max(demand_end, m.want_end);
  }
  if (demand_end <= next_row_ && nearest != std::numeric_limits<uint64_t>::max()) {
    if (decoded_below_ == next_row_) decoded_below_ = nearest;  // nothing in between
    next_row_ = nearest;
    for (const auto& [id, m] : members_)
      if (m.want_end > m.want_begin && m.want_begin <= next_row_ + capacity_)
        demand_end = std::max(demand_end, m.want_end);
  }
  if (demand_end <= next_row_) return;
  started_ = true;
  // A step ahead of the furthest member, but not past the last row any member reads.
  uint64_t last_end = 0;
  for (const auto& [id, m] : members_) {
    if (m.end_row == 0) {
      last_end = std::numeric_limits<uint64_t>::max();
      break;
    }
    last_end = std::max(last_end, m.end_row);
  }
  demand_end = std::max(demand_end, std::min(demand_end + params_.step_rows, last_end));
  Member* slowest = nullptr;
  uint64_t keep_from = KeepFromLocked(&slowest);
  bool held = false;
  bool skipped = false;
  while (next_row_ < demand_end) {
    uint64_t tried = 0;
    while (tried < capacity_ &&
           (state_[cursor_] == RowState::kDecoding || PinnedLocked(cursor_))) {
      cursor_ = (cursor_ + 1) % capacity_;
      ++tried;
      skipped = true;
    }
    if (tried == capacity_) break;  // every position held: wait for a slot to be freed
    if (row_at_[cursor_] != 0 && row_at_[cursor_] - 1 >= keep_from) {
      // Writing here drops a row the slowest member still wants: wait for it, up to hold_ms.
      const int64_t now = NowMs();
      if (slowest->holding_since < 0) slowest->holding_since = now;
      if (now - slowest->holding_since < static_cast<int64_t>(params_.hold_ms)) {
        held = true;
        break;
      }
      slowest->let_go = true;  // it held the others back long enough
      slowest->let_go_at = slowest->want_begin;
      slowest->holding_since = -1;
      keep_from = KeepFromLocked(&slowest);
      continue;
    }
    const std::optional<uint64_t> previous = next_row_ == 0 ? std::nullopt
                                                            : PositionOfLocked(next_row_ - 1);
    if (skipped || !previous || (*previous + 1) % capacity_ != cursor_) {
      runs_[next_row_] = cursor_;
      if (runs_.size() > kMaxRuns) runs_.erase(runs_.begin());
    }
    skipped = false;
    row_at_[cursor_] = next_row_ + 1;
    state_[cursor_] = RowState::kDecoding;
    queue_.emplace_back(next_row_, cursor_);
    ++next_row_;
    cursor_ = (cursor_ + 1) % capacity_;
  }
  if (!held)
    for (auto& [id, m] : members_) m.holding_since = -1;
  const uint32_t threads = pool_ == nullptr ? 1 : pool_->threads;
  while (tasks_ < threads && tasks_ < queue_.size()) {
    ++tasks_;
    if (pool_ != nullptr) {
      pool_->Post([this] { DecodeTask(); });
    } else {
      MutexUnlock unlocked(&mu_);
      DecodeTask();
    }
  }
}

void ShareGroup::DecodeTask() {
  MutexLock lock(&mu_);
  while (!queue_.empty() && !closing_) {
    const auto [row, position] = queue_.front();
    queue_.pop_front();
    const uint64_t sample = SampleOfLocked(row);
    const SampleContext context{params_.seed, row / count_};
    std::array<void*, ring::kMaxTensors> dsts{};
    for (size_t t = 0; t < tensors_.size(); ++t)
      dsts[t] = const_cast<uint8_t*>(Row(t, position));
    std::shared_ptr<const Source> source = source_;
    Status read;
    {
      MutexUnlock unlocked(&mu_);
      read = source->ReadSample(sample, context, dsts.data());
    }
    if (row_at_[position] != row + 1) continue;  // cannot happen: kDecoding is not reused
    state_[position] = read.ok() ? RowState::kReady : RowState::kFailed;
    ++(read.ok() ? rows_decoded_ : rows_failed_);
    // Wake the waiters only when the rows below the frontier now cover one's batch.
    const uint64_t before = decoded_below_;
    while (decoded_below_ < next_row_) {
      const std::optional<uint64_t> at = PositionOfLocked(decoded_below_);
      if (at && state_[*at] == RowState::kDecoding) break;
      ++decoded_below_;
    }
    for (uint64_t end : waiting_ends_)
      if (end > before && end <= decoded_below_) {
        changed_.SignalAll();
        break;
      }
  }
  --tasks_;
  changed_.SignalAll();
}

}  // namespace ember::daemon
