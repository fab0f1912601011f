// _DeviceLoader (CUDA builds only): ember::DeviceLoader for ember.DeviceLoader
// (ember/_device.py), batches on a CUDA device, copied from the registered ring.
#ifndef EMBER_SDK_PYTHON_SRC_DEVICE_LOADER_BINDINGS_H_
#define EMBER_SDK_PYTHON_SRC_DEVICE_LOADER_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace ember::python {

void BindDeviceLoader(pybind11::module_& m);

}  // namespace ember::python

#endif  // EMBER_SDK_PYTHON_SRC_DEVICE_LOADER_BINDINGS_H_
