#include "sdk/sync/gloo_communicator.h"

#include <signal.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/types.h>

#include "sdk/sync/error_of_testing.h"

namespace ember::sdk {
namespace {

using std::chrono::milliseconds;

// Runs `body(rank, comm)` for every rank of `world` on its own thread, all ranks meeting
// in one in-process store; rethrows the first failure.
void RunRanks(int world, const std::function<void(int, Communicator&)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  RunOnThreads(world, [&](int rank) {
    auto comm = MakeGlooCommunicator(store, rank, world, milliseconds(10000), "test");
    body(rank, *comm);
  });
}

TEST_CASE("all-reduce sums tensors of several shapes and dtypes in place") {
  std::vector<std::vector<torch::Tensor>> results(2);
  RunRanks(2, [&](int rank, Communicator& comm) {
    CHECK(comm.rank() == rank);
    CHECK(comm.world_size() == 2);
    torch::Tensor strided = torch::arange(6, torch::kFloat32).view({2, 3}).t() * (rank + 1);
    std::vector<torch::Tensor> tensors = {
        torch::full({2, 3}, rank + 1.0f),
        torch::tensor({int64_t{10} * (rank + 1), int64_t{-1}}),
        strided,
    };
    torch::Tensor strided_alias = tensors[2];
    comm.AllReduceSum(tensors);
    CHECK(tensors[2].is_same(strided_alias));
    results[rank] = tensors;
  });
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(torch::equal(results[rank][0], torch::full({2, 3}, 3.0f)));
    CHECK(torch::equal(results[rank][1], torch::tensor({int64_t{30}, int64_t{-2}})));
    CHECK(torch::equal(results[rank][2], torch::arange(6, torch::kFloat32).view({2, 3}).t() * 3));
  }
}

TEST_CASE("broadcast copies the root's tensors to every rank") {
  std::vector<torch::Tensor> results(3);
  RunRanks(3, [&](int rank, Communicator& comm) {
    std::vector<torch::Tensor> tensors = {torch::full({4}, static_cast<double>(rank))};
    comm.Broadcast(tensors, 2);
    results[rank] = tensors[0];
  });
  for (const torch::Tensor& result : results) CHECK(torch::equal(result, torch::full({4}, 2.0)));
}

TEST_CASE("asynchronous all-reduces overlap and may be waited in any order") {
  std::vector<std::vector<torch::Tensor>> results(3);
  RunRanks(3, [&](int rank, Communicator& comm) {
    std::vector<torch::Tensor> first = {torch::full({1000}, rank + 1.0f),
                                        torch::tensor({int64_t{rank}})};
    std::vector<torch::Tensor> second = {
        (torch::arange(6, torch::kFloat64).view({2, 3}) * (rank + 1)).t()};
    torch::Tensor strided_alias = second[0];
    std::shared_ptr<PendingCollective> a = comm.AllReduceSumAsync(first);
    std::shared_ptr<PendingCollective> b = comm.AllReduceSumAsync(second);
    b->Wait();
    a->Wait();
    a->Wait();  // a second Wait returns at once
    CHECK(second[0].is_same(strided_alias));
    results[rank] = {first[0], first[1], second[0]};
  });
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(torch::equal(results[rank][0], torch::full({1000}, 6.0f)));
    CHECK(torch::equal(results[rank][1], torch::tensor({int64_t{3}})));
    CHECK(torch::equal(results[rank][2], (torch::arange(6, torch::kFloat64).view({2, 3}) * 6).t()));
  }
}

TEST_CASE("waiting on an all-reduce that a peer never joins fails within the timeout") {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::string error;
  double seconds = 0;
  std::thread silent([&] {
    auto comm = MakeGlooCommunicator(store, 1, 2, milliseconds(500), "silent");
    std::this_thread::sleep_for(milliseconds(2500));  // joins, then never reduces
  });
  {
    auto comm = MakeGlooCommunicator(store, 0, 2, milliseconds(500), "silent");
    std::vector<torch::Tensor> tensors = {torch::ones({4})};
    std::shared_ptr<PendingCollective> pending = comm->AllReduceSumAsync(tensors);
    auto start = std::chrono::steady_clock::now();
    error = ErrorOf([&] { pending->Wait(); });
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(ErrorOf([&] { pending->Wait(); }) == error);
    CHECK(ErrorOf([&] { comm->AllReduceSum(tensors); }).find("unusable after an earlier error") !=
          std::string::npos);
  }
  silent.join();
  INFO(error);
  CHECK(error.find("gloo all-reduce (group 'silent', rank 0 of 2) failed: tensor 0 of 1") !=
        std::string::npos);
  CHECK(seconds < 2);
}

TEST_CASE("a single rank needs no peers") {
  auto comm = MakeGlooCommunicator(c10::make_intrusive<c10d::HashStore>(), 0, 1,
                                   milliseconds(1000));
  std::vector<torch::Tensor> tensors = {torch::ones({3})};
  comm->AllReduceSum(tensors);
  CHECK(torch::equal(tensors[0], torch::ones({3})));
  comm->AllReduceSumAsync(tensors)->Wait();
  CHECK(torch::equal(tensors[0], torch::ones({3})));
  std::vector<torch::Tensor> none;
  comm->AllReduceSumAsync(none)->Wait();
  CHECK(ErrorOf([&] { comm->Broadcast(tensors, 1); }).find("root 1 is not a rank") !=
        std::string::npos);
  std::vector<torch::Tensor> undefined = {torch::Tensor()};
  CHECK(ErrorOf([&] { comm->AllReduceSum(undefined); }).find("tensor 0 is undefined") !=
        std::string::npos);
}

void NoteSigpipe(int) {}

TEST_CASE("SIGPIPE's default action becomes ignored; a handler the program set stays") {
  // A write to a dead peer must fail the collective, not end the process (Gloo sends
  // without MSG_NOSIGNAL).
  const auto disposition = [] {
    struct sigaction current {};
    REQUIRE(sigaction(SIGPIPE, nullptr, &current) == 0);
    return current.sa_handler;
  };
  const auto make = [] {
    return MakeGlooCommunicator(c10::make_intrusive<c10d::HashStore>(), 0, 1,
                                milliseconds(1000));
  };
  signal(SIGPIPE, SIG_DFL);
  make();
  CHECK(disposition() == SIG_IGN);
  signal(SIGPIPE, NoteSigpipe);
  make();
  CHECK(disposition() == &NoteSigpipe);
  signal(SIGPIPE, SIG_DFL);
}

TEST_CASE("bad arguments are rejected with the rank and world") {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::string error = ErrorOf([&] { MakeGlooCommunicator(store, 2, 2, milliseconds(1000)); });
  CHECK(error.find("gloo communicator 'default' (rank 2 of 2): rank is outside the world") !=
        std::string::npos);
  error = ErrorOf([&] { MakeGlooCommunicator(store, 0, 1, milliseconds(0)); });
  CHECK(error.find("timeout must be positive") != std::string::npos);
}

TEST_CASE("a missing peer fails the rendezvous within the timeout") {
  auto start = std::chrono::steady_clock::now();
  std::string error = ErrorOf([] {
    MakeGlooCommunicator(c10::make_intrusive<c10d::HashStore>(), 0, 2, milliseconds(300),
                         "lonely");
  });
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(error);
  CHECK(error.find("gloo communicator 'lonely' (rank 0 of 2): rendezvous failed: rank 1 did not "
                   "join within 300 ms") != std::string::npos);
  CHECK(seconds < 5);
}

TEST_CASE("ranks started with different world sizes fail at once, naming both") {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> errors = ErrorsOfThreads(2, [&](int rank) {
    MakeGlooCommunicator(store, rank, /*world_size=*/2 + rank, milliseconds(30000), "w");
  });
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(errors[0] + "\n" + errors[1]);
  CHECK(errors[0].find("gloo communicator 'w' (rank 0 of 2): rendezvous failed: rank 1 was "
                       "started with world size 3, this rank with 2") != std::string::npos);
  CHECK(errors[1].find("gloo communicator 'w' (rank 1 of 3): rendezvous failed: rank 0 was "
                       "started with world size 2, this rank with 3") != std::string::npos);
  CHECK(seconds < 10);  // far from the 30 s timeout
}

}  // namespace
}  // namespace ember::sdk
