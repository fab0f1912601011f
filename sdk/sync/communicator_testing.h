// Test helper: a Communicator for the multi-process tests of sdk/sync without a daemon.
// "gloo" meets its peers in a c10d::FileStore at `store_path`; "shm" maps the file
// `store_path`.shm as the shared segment (every rank creates it if missing and sizes it;
// a fresh path per test gives a zero-filled segment).
#ifndef EMBER_SDK_SYNC_COMMUNICATOR_TESTING_H_
#define EMBER_SDK_SYNC_COMMUNICATOR_TESTING_H_

#include <chrono>
#include <memory>
#include <string>

#include "ember/communicator.h"

namespace ember::sdk::testing {

// Throws c10::Error for an unknown backend or if the communicator cannot be made.
std::unique_ptr<Communicator> MakeTestCommunicator(const std::string& backend,
                                                   const std::string& store_path, int rank,
                                                   int world_size,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& name);

}  // namespace ember::sdk::testing

#endif  // EMBER_SDK_SYNC_COMMUNICATOR_TESTING_H_
