#include "sdk/sync/shm_communicator.h"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "common/futex.h"
#include "sdk/sync/communicator_args.h"
#include "sdk/sync/error_message.h"

namespace ember::sdk {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReasonBytes = 512;
// Polls a waiting rank makes before it sleeps on the futex: a few tens of microseconds,
// enough for a peer that is about to arrive, short enough not to steal a busy core.
constexpr int kSpinPolls = 1000;
// Longest futex sleep between two checks of the peers and the deadline.
constexpr auto kWaitSlice = std::chrono::milliseconds(10);

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// One rank's entry, on its own cache line.
struct alignas(64) RankState {
  std::atomic<int32_t> pid;         // 0 until the rank attached
  std::atomic<uint64_t> arrivals;   // barriers this rank has arrived at
};

// The start of the segment. All fields start zero (the segment is zero-filled).
struct SegmentHeader {
  alignas(64) std::atomic<uint32_t> arrived;     // ranks at the current barrier
  std::atomic<uint32_t> generation;              // barriers completed; the futex word
  alignas(64) std::atomic<uint32_t> failed;      // 0, or 1 + the first rank that failed
  std::atomic<uint32_t> reason_ready;            // 1 once `reason` is written
  char reason[kReasonBytes];
  RankState ranks[kShmMaxRanks];
};

constexpr uint64_t kDataOffset = (sizeof(SegmentHeader) + 4095) / 4096 * 4096;

void Pause() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// The mapped segment and the barrier protocol over it; one per rank.
class ShmGroup {
 public:
  ShmGroup(void* base, uint64_t bytes, int rank, int world_size,
           std::chrono::milliseconds timeout, std::string name)
      : base_(static_cast<std::byte*>(base)),
        bytes_(bytes),
        header_(static_cast<SegmentHeader*>(base)),
        rank_(rank),
        world_size_(world_size),
        timeout_(timeout),
        name_(std::move(name)),
        pidfds_(world_size, -1) {}

  ~ShmGroup() {
    for (int fd : pidfds_) {
      if (fd >= 0) close(fd);
    }
    munmap(base_, bytes_);
  }

  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  std::string Where(const char* op) const {
    return "shared-memory " + std::string(op) + " (group '" + name_ + "', rank " +
           std::to_string(rank_) + " of " + std::to_string(world_size_) + ")";
  }

  void Attach() {
    const char* op = "rendezvous";
    const int32_t pid = getpid();
    int32_t previous = 0;
    if (!header_->ranks[rank_].pid.compare_exchange_strong(previous, pid)) {
      Fail(op, "rank " + std::to_string(rank_) + " is already attached (pid " +
                   std::to_string(previous) + "); is the rank number given twice?");
    }
    Barrier(op, Clock::now() + timeout_);
    for (int peer = 0; peer < world_size_; ++peer) {
      const int32_t peer_pid = header_->ranks[peer].pid.load(std::memory_order_acquire);
      if (peer == rank_ || peer_pid == pid) continue;  // ranks sharing a process (tests)
      const long fd = syscall(SYS_pidfd_open, peer_pid, 0);
      if (fd >= 0) {
        pidfds_[peer] = static_cast<int>(fd);
      } else if (errno == ESRCH) {
        Fail(op, "rank " + std::to_string(peer) + " (pid " + std::to_string(peer_pid) +
                     ") exited right after attaching");
      }  // else (old kernel, other pid namespace): only the timeout catches a dead peer
    }
  }

  // Sums each tensor (contiguous, CPU, not bool) over the ranks, in place.
  void AllReduceSum(const std::vector<torch::Tensor>& tensors) {
    if (world_size_ == 1) return;
    const auto deadline = Clock::now() + timeout_;
    Round round;
    for (size_t t = 0; t < tensors.size(); ++t) {
      const torch::Tensor& tensor = tensors[t];
      const int64_t element = tensor.element_size();
      const int64_t capacity = static_cast<int64_t>(kShmChunkBytes) / element;
      if (!round.pieces.empty() && round.dtype != tensor.scalar_type()) {
        ReduceRound(round, deadline);
        round = Round{};
      }
      int64_t offset = 0;
      while (offset < tensor.numel()) {
        round.dtype = tensor.scalar_type();
        round.element = element;
        const int64_t count = std::min(tensor.numel() - offset, capacity - round.count);
        round.pieces.push_back({static_cast<std::byte*>(tensor.data_ptr()) + offset * element,
                                round.count, count});
        round.count += count;
        offset += count;
        if (round.count == capacity) {
          ReduceRound(round, deadline);
          round = Round{};
        }
      }
    }
    if (!round.pieces.empty()) ReduceRound(round, deadline);
  }

  // Copies `root`'s tensors (contiguous, CPU) over every other rank's.
  void Broadcast(const std::vector<torch::Tensor>& tensors, int root) {
    if (world_size_ == 1) return;
    const auto deadline = Clock::now() + timeout_;
    for (const torch::Tensor& tensor : tensors) {
      auto* data = static_cast<std::byte*>(tensor.data_ptr());
      const uint64_t bytes = tensor.nbytes();
      for (uint64_t offset = 0; offset < bytes; offset += kShmChunkBytes) {
        const uint64_t n = std::min<uint64_t>(kShmChunkBytes, bytes - offset);
        std::byte* slot = Slot(NextBuffer(), root);
        if (rank_ == root) std::memcpy(slot, data + offset, n);
        Barrier("broadcast", deadline);
        if (rank_ != root) std::memcpy(data + offset, slot, n);
      }
    }
  }

  // Records `why` in the segment unless another rank failed first, wakes every waiting
  // rank, and throws.
  [[noreturn]] void Fail(const char* op, const std::string& why) {
    uint32_t none = 0;
    if (header_->failed.compare_exchange_strong(none, static_cast<uint32_t>(rank_) + 1)) {
      const std::string text = Where(op) + ": " + why;
      const size_t n = std::min(text.size(), kReasonBytes - 1);
      std::memcpy(header_->reason, text.data(), n);
      header_->reason[n] = '\0';
      header_->reason_ready.store(1, std::memory_order_release);
    }
    FutexWakeAll(&header_->generation);
    TORCH_CHECK(false, Where(op), " failed: ", why);
  }

 private:
  struct Piece {
    std::byte* data;
    int64_t first;  // index of its first element in the round
    int64_t count;
  };
  // Elements of one dtype reduced together: at most kShmChunkBytes per rank.
  struct Round {
    torch::ScalarType dtype = torch::kFloat32;
    int64_t element = 0;
    int64_t count = 0;
    std::vector<Piece> pieces;
  };

  int NextBuffer() {
    const int buffer = next_buffer_;
    next_buffer_ ^= 1;
    return buffer;
  }

  std::byte* Slot(int buffer, int rank) const {
    return base_ + kDataOffset +
           (static_cast<uint64_t>(buffer) * world_size_ + rank) * kShmChunkBytes;
  }

  // The elements [begin, end) of a round that rank `owner` sums.
  std::pair<int64_t, int64_t> Slice(int64_t count, int owner) const {
    return {count * owner / world_size_, count * (owner + 1) / world_size_};
  }

  void ReduceRound(const Round& round, Clock::time_point deadline) {
    const int buffer = NextBuffer();
    const int64_t e = round.element;
    std::byte* mine = Slot(buffer, rank_);
    for (const Piece& piece : round.pieces) {
      std::memcpy(mine + piece.first * e, piece.data, piece.count * e);
    }
    Barrier("all-reduce", deadline);

    const auto [begin, end] = Slice(round.count, rank_);
    if (end > begin) {
      const auto options = torch::TensorOptions().dtype(round.dtype);
      torch::Tensor sum = torch::from_blob(mine + begin * e, {end - begin}, options);
      for (int peer = 0; peer < world_size_; ++peer) {
        if (peer == rank_) continue;
        sum.add_(torch::from_blob(Slot(buffer, peer) + begin * e, {end - begin}, options));
      }
    }
    Barrier("all-reduce", deadline);

    for (const Piece& piece : round.pieces) {
      for (int owner = 0; owner < world_size_; ++owner) {
        const auto [owner_begin, owner_end] = Slice(round.count, owner);
        const int64_t lo = std::max(piece.first, owner_begin);
        const int64_t hi = std::min(piece.first + piece.count, owner_end);
        if (lo < hi) {
          std::memcpy(piece.data + (lo - piece.first) * e, Slot(buffer, owner) + lo * e,
                      (hi - lo) * e);
        }
      }
    }
  }

  // Returns once every rank has arrived at this barrier; throws (after recording why)
  // if a peer failed or exited first, or at `deadline`.
  void Barrier(const char* op, Clock::time_point deadline) {
    CheckFailed(op);
    const uint32_t generation = header_->generation.load(std::memory_order_acquire);
    ++arrivals_;
    header_->ranks[rank_].arrivals.store(arrivals_, std::memory_order_relaxed);
    if (header_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 ==
        static_cast<uint32_t>(world_size_)) {
      header_->arrived.store(0, std::memory_order_relaxed);
      header_->generation.store(generation + 1, std::memory_order_release);
      FutexWakeAll(&header_->generation);
      return;
    }
    for (int i = 0; i < kSpinPolls; ++i) {
      if (header_->generation.load(std::memory_order_acquire) != generation) return;
      Pause();
    }
    while (true) {
      if (header_->generation.load(std::memory_order_acquire) != generation) return;
      CheckFailed(op);
      CheckExited(op);
      const auto now = Clock::now();
      if (now >= deadline) {
        Fail(op, "timed out after " + std::to_string(timeout_.count()) +
                     " ms waiting for " + Missing());
      }
      FutexWait(&header_->generation, generation,
                std::min<Clock::duration>(kWaitSlice, deadline - now));
    }
  }

  // Throws if another rank has failed.
  void CheckFailed(const char* op) const {
    const uint32_t failed = header_->failed.load(std::memory_order_acquire);
    if (failed == 0) return;
    std::string why = "rank " + std::to_string(failed - 1) + " failed";
    if (header_->reason_ready.load(std::memory_order_acquire) != 0) {
      why += ": " + std::string(header_->reason);
    }
    TORCH_CHECK(false, Where(op), " failed: ", why);
  }

  // Fails if a peer that has not arrived at this rank's barrier has exited (it never
  // will arrive). One that arrived and then exited holds nothing up.
  void CheckExited(const char* op) {
    for (int peer = 0; peer < world_size_; ++peer) {
      if (pidfds_[peer] < 0) continue;
      pollfd exited{pidfds_[peer], POLLIN, 0};
      if (poll(&exited, 1, 0) <= 0) continue;
      // Read after seeing the exit, so that an arrival just before it is seen.
      if (header_->ranks[peer].arrivals.load(std::memory_order_acquire) >= arrivals_) continue;
      Fail(op, "rank " + std::to_string(peer) + " (pid " +
                   std::to_string(header_->ranks[peer].pid.load()) +
                   ") exited before reaching the collective");
    }
  }

  // "rank(s) 1 (pid 123), 2 (not attached)": the peers behind this rank.
  std::string Missing() const {
    std::string list;
    for (int peer = 0; peer < world_size_; ++peer) {
      if (header_->ranks[peer].arrivals.load(std::memory_order_relaxed) >= arrivals_) continue;
      const int32_t pid = header_->ranks[peer].pid.load(std::memory_order_relaxed);
      list += (list.empty() ? "" : ", ") + std::to_string(peer) +
              (pid == 0 ? " (not attached)" : " (pid " + std::to_string(pid) + ")");
    }
    return "rank(s) " + (list.empty() ? std::string("?") : list);
  }

  std::byte* const base_;
  const uint64_t bytes_;
  SegmentHeader* const header_;
  const int rank_;
  const int world_size_;
  const std::chrono::milliseconds timeout_;
  const std::string name_;
  std::vector<int> pidfds_;
  uint64_t arrivals_ = 0;
  int next_buffer_ = 0;
};

// Contiguous stand-ins for the caller's tensors; Finish copies results back into the
// ones that were not contiguous.
struct Wire {
  explicit Wire(const std::vector<torch::Tensor>& targets) : targets(targets) {
    for (const torch::Tensor& tensor : targets) {
      tensors.push_back(tensor.is_contiguous() ? tensor : tensor.contiguous());
    }
  }
  void Finish() {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < targets.size(); ++i) {
      if (!tensors[i].is_same(targets[i])) targets[i].copy_(tensors[i]);
    }
  }
  std::vector<torch::Tensor> targets;
  std::vector<torch::Tensor> tensors;
};

class ShmCommunicator;

// An all-reduce queued by AllReduceSumAsync.
struct QueuedAllReduce {
  explicit QueuedAllReduce(const std::vector<torch::Tensor>& targets) : wire(targets) {}
  Wire wire;
  bool done = false;
  std::string failure;
};

class ShmPending final : public PendingCollective {
 public:
  ShmPending(ShmCommunicator* comm, std::shared_ptr<QueuedAllReduce> op)
      : comm_(comm), op_(std::move(op)) {}
  void Wait() override;

 private:
  ShmCommunicator* const comm_;
  const std::shared_ptr<QueuedAllReduce> op_;
};

class ShmCommunicator final : public Communicator {
 public:
  explicit ShmCommunicator(std::unique_ptr<ShmGroup> group) : group_(std::move(group)) {}

  ~ShmCommunicator() override {
    if (!queue_.empty() && errors_.message().empty()) {
      try {
        RunThrough(nullptr);
      } catch (const std::exception&) {
      }
    }
  }

  int rank() const override { return group_->rank(); }
  int world_size() const override { return group_->world_size(); }

  void AllReduceSum(std::vector<torch::Tensor>& tensors) override {
    const char* op = "all-reduce";
    errors_.CheckUsable(group_->Where(op));
    CheckTensors(tensors, op);
    RunThrough(nullptr);
    errors_.CheckUsable(group_->Where(op));
    Wire wire(tensors);
    errors_.Guard([&] { group_->AllReduceSum(wire.tensors); });
    wire.Finish();
  }

  std::shared_ptr<PendingCollective> AllReduceSumAsync(
      std::vector<torch::Tensor>& tensors) override {
    const char* op = "all-reduce";
    errors_.CheckUsable(group_->Where(op));
    CheckTensors(tensors, op);
    auto queued = std::make_shared<QueuedAllReduce>(tensors);
    queue_.push_back(queued);
    return std::make_shared<ShmPending>(this, std::move(queued));
  }

  void Broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    const char* op = "broadcast";
    TORCH_CHECK(root >= 0 && root < world_size(), group_->Where(op), ": root ", root,
                " is not a rank of this world");
    errors_.CheckUsable(group_->Where(op));
    CheckTensors(tensors, op);
    RunThrough(nullptr);
    errors_.CheckUsable(group_->Where(op));
    Wire wire(tensors);
    errors_.Guard([&] { group_->Broadcast(wire.tensors, root); });
    wire.Finish();
  }

  // Runs queued all-reduces in launch order up to and including `last` (all if null).
  void RunThrough(const QueuedAllReduce* last) {
    while (!queue_.empty()) {
      std::shared_ptr<QueuedAllReduce> op = queue_.front();
      queue_.pop_front();
      if (!errors_.message().empty()) {
        op->failure = "communicator is unusable after an earlier error: " + errors_.message();
      } else {
        try {
          errors_.Guard([&] { group_->AllReduceSum(op->wire.tensors); });
          op->wire.Finish();
          op->done = true;
        } catch (const std::exception& e) {
          op->failure = ErrorMessage(e);
        }
      }
      if (op.get() == last) break;
    }
  }

 private:
  void CheckTensors(const std::vector<torch::Tensor>& tensors, const char* op) const {
    CheckCpuTensors(tensors, group_->Where(op), /*bool_ok=*/false);
  }

  std::unique_ptr<ShmGroup> group_;
  std::deque<std::shared_ptr<QueuedAllReduce>> queue_;
  FirstError errors_;
};

void ShmPending::Wait() {
  if (!op_->done && op_->failure.empty()) comm_->RunThrough(op_.get());
  TORCH_CHECK(op_->failure.empty(), op_->failure);
}

}  // namespace

uint64_t ShmSegmentBytes(int world_size) {
  TORCH_CHECK(world_size >= 1 && world_size <= kShmMaxRanks,
              "shared-memory communicator: world size must be 1 to ", kShmMaxRanks, ", got ",
              world_size);
  return kDataOffset + 2 * static_cast<uint64_t>(world_size) * kShmChunkBytes;
}

std::unique_ptr<Communicator> MakeShmCommunicator(int fd, int rank, int world_size,
                                                  std::chrono::milliseconds timeout,
                                                  const std::string& name) {
  const std::string where =
      CheckCommunicatorArgs("shared-memory", name, rank, world_size, timeout, kShmMaxRanks);
  const uint64_t bytes = ShmSegmentBytes(world_size);
  struct stat st {};
  TORCH_CHECK(fstat(fd, &st) == 0, where, ": fstat of the segment (fd ", fd, "): ",
              std::strerror(errno));
  TORCH_CHECK(static_cast<uint64_t>(st.st_size) == bytes, where, ": the segment has ",
              st.st_size, " bytes, a world of ", world_size, " needs ", bytes,
              " (do all ranks agree on the world size?)");
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  TORCH_CHECK(base != MAP_FAILED, where, ": mapping the segment (", bytes,
              " bytes): ", std::strerror(errno));
  auto group = std::make_unique<ShmGroup>(base, bytes, rank, world_size, timeout, name);
  try {
    group->Attach();
  } catch (const std::exception& e) {
    TORCH_CHECK(false, where, ": rendezvous failed (timeout ", timeout.count(), " ms): ",
                ErrorMessage(e));
  }
  return std::make_unique<ShmCommunicator>(std::move(group));
}

}  // namespace ember::sdk
