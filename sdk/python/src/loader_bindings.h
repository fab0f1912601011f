// The native half of ember.Loader (ember/_loader.py): _Loader over ember::RawLoader with
// the GIL released and Ctrl-C checked while it waits, its batches' tensors as DLPack
// (SlotTensor: torch, numpy and JAX take them with their own from_dlpack; nothing here
// links torch), LoaderState and the launch environment.
#ifndef EMBER_SDK_PYTHON_SRC_LOADER_BINDINGS_H_
#define EMBER_SDK_PYTHON_SRC_LOADER_BINDINGS_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "ember/client.h"

namespace ember::python {

void BindLoader(pybind11::module_& m);

// The stream options of _Loader's (and _DeviceLoader's) constructor arguments.
StreamOptions MakeStreamOptions(const std::string& job, const std::string& dataset,
                                uint32_t batch_size, uint64_t seed, uint32_t rank,
                                uint32_t world_size, uint32_t epochs, bool shuffle,
                                uint32_t slots, bool sample_ids, const std::string& coordinator,
                                const std::string& share);

}  // namespace ember::python

#endif  // EMBER_SDK_PYTHON_SRC_LOADER_BINDINGS_H_
