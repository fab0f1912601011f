#include "sdk/sync/shm_communicator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <torch/types.h>

#include "sdk/sync/error_of_testing.h"

namespace ember::sdk {
namespace {

using std::chrono::milliseconds;

// A zero-filled memfd of `bytes`, closed by the destructor.
struct Segment {
  explicit Segment(uint64_t bytes) : fd(memfd_create("shm_communicator_test", MFD_CLOEXEC)) {
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, static_cast<off_t>(bytes)) == 0);
  }
  ~Segment() { close(fd); }
  int fd;
};

// Runs `body(rank, comm)` for every rank of `world` on its own thread, all attached to
// one segment; rethrows the first failure.
void RunRanks(int world, const std::function<void(int, Communicator&)>& body,
              milliseconds timeout = milliseconds(10000)) {
  Segment segment(ShmSegmentBytes(world));
  RunOnThreads(world, [&](int rank) {
    auto comm = MakeShmCommunicator(segment.fd, rank, world, timeout, "test");
    body(rank, *comm);
  });
}

// Rank `rank`'s contribution: distinct per rank and element, exact in every dtype used.
torch::Tensor Values(int rank, int64_t n, torch::ScalarType dtype) {
  return (torch::arange(n, torch::kInt64) % 1000 + 7 * rank).to(dtype);
}

TEST_CASE("all-reduce sums tensors of several sizes and dtypes, every rank the same bits") {
  const int world = 3;
  // Larger than a slot (several rounds), small, other dtypes, strided.
  const int64_t big = static_cast<int64_t>(kShmChunkBytes) / 4 * 2 + 12345;
  std::vector<std::vector<torch::Tensor>> results(world);
  RunRanks(world, [&](int rank, Communicator& comm) {
    CHECK(comm.rank() == rank);
    CHECK(comm.world_size() == world);
    std::vector<torch::Tensor> tensors = {
        Values(rank, big, torch::kFloat32),
        Values(rank, 5, torch::kFloat32),
        Values(rank, 300000, torch::kFloat64),
        Values(rank, 3, torch::kInt64),
        Values(rank, 7, torch::kHalf),
        Values(rank, 12, torch::kFloat32).view({3, 4}).t(),
        torch::empty({0}),
    };
    comm.AllReduceSum(tensors);
    results[rank] = tensors;
  });
  for (int rank = 0; rank < world; ++rank) {
    const std::vector<torch::Tensor>& got = results[rank];
    REQUIRE(got.size() == 7);
    auto expected = [&](int64_t n, torch::ScalarType dtype) {
      return (torch::arange(n, torch::kInt64) % 1000 * world + 7 * (0 + 1 + 2)).to(dtype);
    };
    CHECK(torch::equal(got[0], expected(big, torch::kFloat32)));
    CHECK(torch::equal(got[1], expected(5, torch::kFloat32)));
    CHECK(torch::equal(got[2], expected(300000, torch::kFloat64)));
    CHECK(torch::equal(got[3], expected(3, torch::kInt64)));
    CHECK(torch::equal(got[4], expected(7, torch::kHalf)));
    CHECK(torch::equal(got[5], expected(12, torch::kFloat32).view({3, 4}).t()));
    CHECK(got[6].numel() == 0);
  }
  // Fractions whose sum depends on the order of additions: still identical bits.
  std::vector<torch::Tensor> sums(world);
  RunRanks(world, [&](int rank, Communicator& comm) {
    torch::manual_seed(rank);
    std::vector<torch::Tensor> tensors = {torch::randn({100000})};
    comm.AllReduceSum(tensors);
    sums[rank] = tensors[0];
  });
  CHECK(torch::equal(sums[0], sums[1]));
  CHECK(torch::equal(sums[0], sums[2]));
}

TEST_CASE("broadcast copies the root's tensors, also those larger than a slot") {
  const int world = 3, root = 1;
  const int64_t big = static_cast<int64_t>(kShmChunkBytes) / 8 + 99;
  std::vector<std::vector<torch::Tensor>> results(world);
  RunRanks(world, [&](int rank, Communicator& comm) {
    std::vector<torch::Tensor> tensors = {Values(rank, big, torch::kFloat64),
                                          Values(rank, 4, torch::kInt32)};
    comm.Broadcast(tensors, root);
    results[rank] = tensors;
    CHECK(ErrorOf([&] { comm.Broadcast(tensors, world); }).find("root 3 is not a rank") !=
          std::string::npos);
  });
  for (int rank = 0; rank < world; ++rank) {
    CHECK(torch::equal(results[rank][0], Values(root, big, torch::kFloat64)));
    CHECK(torch::equal(results[rank][1], Values(root, 4, torch::kInt32)));
  }
}

TEST_CASE("queued all-reduces run in launch order whichever is waited first") {
  RunRanks(2, [&](int rank, Communicator& comm) {
    std::vector<torch::Tensor> first = {torch::full({4}, rank + 1.0)};
    std::vector<torch::Tensor> second = {torch::full({3}, 10.0 * (rank + 1))};
    std::vector<torch::Tensor> dropped = {torch::full({2}, 100.0 * (rank + 1))};
    auto a = comm.AllReduceSumAsync(first);
    auto b = comm.AllReduceSumAsync(second);
    b->Wait();  // runs `first` too
    CHECK(torch::equal(second[0], torch::full({3}, 30.0)));
    a->Wait();
    a->Wait();  // a no-op
    CHECK(torch::equal(first[0], torch::full({4}, 3.0)));
    // Dropped without Wait: it still runs, before the next blocking collective.
    comm.AllReduceSumAsync(dropped).reset();
    std::vector<torch::Tensor> last = {torch::ones({1})};
    comm.AllReduceSum(last);
    CHECK(torch::equal(dropped[0], torch::full({2}, 300.0)));
    CHECK(last[0].item<float>() == 2.0f);
  });
}

TEST_CASE("one rank is a no-op") {
  RunRanks(1, [&](int, Communicator& comm) {
    std::vector<torch::Tensor> tensors = {torch::arange(5.0)};
    comm.AllReduceSum(tensors);
    comm.Broadcast(tensors, 0);
    CHECK(torch::equal(tensors[0], torch::arange(5.0)));
  });
}

TEST_CASE("a rank that never attaches fails the rendezvous within the timeout") {
  Segment segment(ShmSegmentBytes(2));
  const auto start = std::chrono::steady_clock::now();
  const std::string error =
      ErrorOf([&] { MakeShmCommunicator(segment.fd, 0, 2, milliseconds(300), "lonely"); });
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  INFO(error);
  CHECK(error.find("rendezvous failed") != std::string::npos);
  CHECK(error.find("rank(s) 1 (not attached)") != std::string::npos);
}

TEST_CASE("a peer that stops calling makes the waiting rank time out and then fails too") {
  Segment segment(ShmSegmentBytes(2));
  std::string waiting_error, late_error;
  std::thread late([&] {
    auto comm = MakeShmCommunicator(segment.fd, 1, 2, milliseconds(300), "stall");
    std::this_thread::sleep_for(milliseconds(1000));
    std::vector<torch::Tensor> tensors = {torch::ones({3})};
    late_error = ErrorOf([&] { comm->AllReduceSum(tensors); });
  });
  {
    auto comm = MakeShmCommunicator(segment.fd, 0, 2, milliseconds(300), "stall");
    std::vector<torch::Tensor> tensors = {torch::ones({3})};
    waiting_error = ErrorOf([&] { comm->AllReduceSum(tensors); });
    CHECK(ErrorOf([&] { comm->AllReduceSum(tensors); }).find("unusable after an earlier error") !=
          std::string::npos);
  }
  late.join();
  INFO(waiting_error);
  INFO(late_error);
  CHECK(waiting_error.find("timed out after 300 ms waiting for rank(s) 1 (pid") !=
        std::string::npos);
  // The late rank learns why from the segment instead of waiting out its own timeout.
  CHECK(late_error.find("rank 0 failed") != std::string::npos);
  CHECK(late_error.find("timed out") != std::string::npos);
}

TEST_CASE("bad segments and arguments are refused with the reason") {
  Segment small(4096);
  CHECK(ErrorOf([&] { MakeShmCommunicator(small.fd, 0, 2, milliseconds(100)); })
            .find("the segment has 4096 bytes, a world of 2 needs") != std::string::npos);
  Segment segment(ShmSegmentBytes(2));
  CHECK(ErrorOf([&] { MakeShmCommunicator(segment.fd, 2, 2, milliseconds(100)); })
            .find("rank is outside the world") != std::string::npos);
  CHECK(ErrorOf([&] { MakeShmCommunicator(segment.fd, 0, 2, milliseconds(0)); })
            .find("timeout must be positive") != std::string::npos);
  CHECK(ErrorOf([&] { ShmSegmentBytes(0); }).find("world size must be 1 to") != std::string::npos);
}

TEST_CASE("a rank number given twice is refused") {
  Segment segment(ShmSegmentBytes(2));
  std::string second;
  std::thread first([&] {
    ErrorOf([&] { MakeShmCommunicator(segment.fd, 0, 2, milliseconds(500), "twice"); });
  });
  std::this_thread::sleep_for(milliseconds(100));
  second = ErrorOf([&] { MakeShmCommunicator(segment.fd, 0, 2, milliseconds(500), "twice"); });
  first.join();
  INFO(second);
  CHECK(second.find("rank 0 is already attached") != std::string::npos);
}

TEST_CASE("bool and undefined tensors are argument errors") {
  RunRanks(2, [&](int, Communicator& comm) {
    std::vector<torch::Tensor> flags = {torch::ones({2}, torch::kBool)};
    CHECK(ErrorOf([&] { comm.AllReduceSumAsync(flags); }).find("bool") != std::string::npos);
    std::vector<torch::Tensor> undefined = {torch::Tensor()};
    CHECK(ErrorOf([&] { comm.AllReduceSum(undefined); }).find("undefined") != std::string::npos);
  });
}

}  // namespace
}  // namespace ember::sdk
