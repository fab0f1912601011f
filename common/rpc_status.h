// How ember::Status crosses Cap'n Proto RPC (internal to the daemon's and the SDK's RPC
// adapters): as a kj::Exception whose description is "<status code name>: <message>".
#ifndef EMBER_COMMON_RPC_STATUS_H_
#define EMBER_COMMON_RPC_STATUS_H_

#include <kj/exception.h>

#include "ember/status.h"

namespace ember::rpc_status {

// `status` must not be OK. kResourceExhausted travels as OVERLOADED, the rest as FAILED.
kj::Exception ToException(const Status& status);

// Recovers the code and message; an exception that did not come from ToException (a
// dropped connection, a bug) becomes kUnavailable / kInternal with its description.
Status FromException(const kj::Exception& exception);

}  // namespace ember::rpc_status

#endif  // EMBER_COMMON_RPC_STATUS_H_
