// A trainer stand-in for crash tests: opens a stream, takes `hold` batches and keeps
// them (and the ring) until it is killed. Prints "ready" once it holds them.
//   stream_reader_main SOCKET DATASET JOB HOLD
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "ember/client.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s SOCKET DATASET JOB HOLD\n", argv[0]);
    return 2;
  }
  ember::ClientOptions options;
  options.socket_path = argv[1];
  auto client = ember::Client::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  ember::StreamOptions so;
  so.dataset = argv[2];
  so.job = argv[3];
  so.batch_size = 16;
  so.epochs = 0;
  auto reader = (*client)->OpenStream(so);
  if (!reader.ok()) {
    std::fprintf(stderr, "%s\n", reader.status().ToString().c_str());
    return 1;
  }
  std::vector<ember::RawBatch> held;
  for (int i = 0; i < std::atoi(argv[4]); ++i) {
    auto next = (*reader)->Next();
    if (!next.ok() || !next->has_value()) {
      std::fprintf(stderr, "no batch: %s\n", next.ok() ? "epoch end" : next.status().ToString().c_str());
      return 1;
    }
    held.push_back(std::move(**next));
  }
  std::printf("ready\n");
  std::fflush(stdout);
  while (true) pause();
}
