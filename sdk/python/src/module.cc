// The `ember._ember` extension module: the C++ SDK (ember/client.h, ember/raw_loader.h)
// for the Python package in sdk/python/ember. It links no torch: batches leave it as
// DLPack, in every configuration (ember.DeviceLoader is Python over the imported torch).
#include <pybind11/pybind11.h>

#include "sdk/python/src/client_bindings.h"
#include "sdk/python/src/errors.h"
#include "sdk/python/src/loader_bindings.h"

PYBIND11_MODULE(_ember, m) {
  m.doc() = "Ember's C++ SDK (use the `ember` package, not this module).";
  ember::python::RegisterErrors();
  ember::python::BindClient(m);
  ember::python::BindLoader(m);
}
