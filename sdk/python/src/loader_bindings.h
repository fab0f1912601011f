// The native half of ember.Loader (ember/_loader.py): _Loader over ember::Loader with
// the GIL released and Ctrl-C checked while it waits, LoaderState, the launch
// environment, and release_tensors (a batch's slot back at once).
#ifndef EMBER_SDK_PYTHON_SRC_LOADER_BINDINGS_H_
#define EMBER_SDK_PYTHON_SRC_LOADER_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace ember::python {

void BindLoader(pybind11::module_& m);

}  // namespace ember::python

#endif  // EMBER_SDK_PYTHON_SRC_LOADER_BINDINGS_H_
