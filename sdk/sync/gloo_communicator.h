// Gloo-backed Communicator (CPU tensors over TCP) bootstrapped through any c10d::Store.
// ember/model_sync.h wraps this with the emberd Coordinator store; tests use a
// c10d::FileStore so that no daemon is needed.
#ifndef EMBER_SDK_SYNC_GLOO_COMMUNICATOR_H_
#define EMBER_SDK_SYNC_GLOO_COMMUNICATOR_H_

#include <chrono>
#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ember/communicator.h"

namespace ember::sdk {

// Joins `world_size` ranks that call this with the same store and `name`. The
// rendezvous keys live under "ember/gloo/<name>/" of `store`, so several communicators
// can share one store as long as their names differ; a name must not be reused on the
// same store while keys of an earlier group with that name are still there.
// Listens on 127.0.0.1 when all ranks are on one node; with `across_nodes`, on
// $GLOO_SOCKET_IFNAME's interface, else on the address the host name resolves to.
//
// `timeout` bounds the rendezvous and every later collective (it also becomes the
// store's timeout). The communicator keeps `store` alive. Blocks until every rank has
// joined; throws c10::Error naming the rank, world and group if the arguments are bad or
// the rendezvous fails or times out. If SIGPIPE has its default action, sets it to
// ignored (Gloo's writes to a dead peer would otherwise end the process silently).
std::unique_ptr<Communicator> MakeGlooCommunicator(c10::intrusive_ptr<c10d::Store> store,
                                                   int rank, int world_size,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& name = "default",
                                                   bool across_nodes = false);

}  // namespace ember::sdk

#endif  // EMBER_SDK_SYNC_GLOO_COMMUNICATOR_H_
