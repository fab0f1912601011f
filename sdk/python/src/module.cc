// The `ember._ember` extension module: the C++ SDK (ember/client.h, ember/loader.h) for
// the Python package in sdk/python/ember, which imports torch before it.
#include <pybind11/pybind11.h>

#include "sdk/python/src/client_bindings.h"
#include "sdk/python/src/errors.h"
#include "sdk/python/src/loader_bindings.h"
#ifdef EMBER_PYTHON_CUDA
#include "sdk/python/src/device_loader_bindings.h"
#endif

PYBIND11_MODULE(_ember, m) {
  m.doc() = "Ember's C++ SDK (use the `ember` package, not this module).";
  ember::python::RegisterErrors();
  ember::python::BindClient(m);
  ember::python::BindLoader(m);
#ifdef EMBER_PYTHON_CUDA
  ember::python::BindDeviceLoader(m);
#endif
}
