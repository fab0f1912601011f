// ember.Client and the records it returns (DatasetInfo, DaemonStatus, ...), bound from
// ember/client.h. Every call releases the GIL while it waits for the daemon.
#ifndef EMBER_SDK_PYTHON_SRC_CLIENT_BINDINGS_H_
#define EMBER_SDK_PYTHON_SRC_CLIENT_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace ember::python {

void BindClient(pybind11::module_& m);

}  // namespace ember::python

#endif  // EMBER_SDK_PYTHON_SRC_CLIENT_BINDINGS_H_
