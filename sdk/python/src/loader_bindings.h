// The native half of ember.Loader (ember/_loader.py): _Loader over ember::Loader with
// the GIL released and Ctrl-C checked while it waits, LoaderState, the launch
// environment, and release_tensors (a batch's slot back at once).
#ifndef EMBER_SDK_PYTHON_SRC_LOADER_BINDINGS_H_
#define EMBER_SDK_PYTHON_SRC_LOADER_BINDINGS_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "ember/client.h"
#include "ember/loader.h"

namespace ember::python {

void BindLoader(pybind11::module_& m);

// The stream options of _Loader's (and _DeviceLoader's) constructor arguments.
StreamOptions MakeStreamOptions(const std::string& job, const std::string& dataset,
                                uint32_t batch_size, uint64_t seed, uint32_t rank,
                                uint32_t world_size, uint32_t epochs, bool shuffle,
                                uint32_t slots, bool sample_ids, const std::string& coordinator);

// A batch as _Loader.next() returns it: (tensors by name, epoch, step, last_in_epoch).
pybind11::tuple BatchTuple(Batch& batch);

}  // namespace ember::python

#endif  // EMBER_SDK_PYTHON_SRC_LOADER_BINDINGS_H_
