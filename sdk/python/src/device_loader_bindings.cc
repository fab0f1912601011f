#include "sdk/python/src/device_loader_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/util/Exception.h>

#include <memory>
#include <optional>
#include <string>

#include "ember/client.h"
#include "ember/device_loader.h"
#include "sdk/python/src/errors.h"
#include "sdk/python/src/loader_bindings.h"

namespace ember::python {
namespace {

namespace py = pybind11;

// A batch as _DeviceLoader.next() returns it: (tensors by name, epoch, step, last).
py::tuple BatchTuple(Batch& batch) {
  py::dict tensors;
  for (size_t i = 0; i < batch.names.size(); ++i)
    tensors[py::str(batch.names[i])] = py::cast(std::move(batch.tensors[i]));
  return py::make_tuple(tensors, batch.epoch, batch.index_in_epoch, batch.last_in_epoch);
}

// ember::DeviceLoader throws c10::Error (the daemon's message or a CUDA error's); as
// ember.Error they are caught like the host loader's.
template <typename F>
auto Translated(F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    Raise(Internal(e.what_without_backtrace()));
  }
}

class PyDeviceLoader {
 public:
  PyDeviceLoader(std::shared_ptr<Client> client, const StreamOptions& options,
                 const DeviceLoaderOptions& device_options)
      : client_(std::move(client)) {
    loader_ = Translated([&] {
      py::gil_scoped_release release;
      return std::make_unique<DeviceLoader>(*client_, options, device_options);
    });
  }

  py::object Next() {
    std::optional<Batch> next = Translated([&] {
      py::gil_scoped_release release;
      return loader_->Next();
    });
    if (!next) return py::none();
    return BatchTuple(*next);
  }

  const DeviceLoader& loader() const { return *loader_; }

 private:
  std::shared_ptr<Client> client_;  // outlives loader_
  std::unique_ptr<DeviceLoader> loader_;
};

}  // namespace

void BindDeviceLoader(py::module_& m) {
  py::class_<PyDeviceLoader>(m, "_DeviceLoader")
      .def(py::init([](std::shared_ptr<Client> client, const std::string& job,
                       const std::string& dataset, uint32_t batch_size, uint64_t seed,
                       uint32_t rank, uint32_t world_size, uint32_t epochs, bool shuffle,
                       uint32_t slots, bool sample_ids, const std::string& coordinator,
                       int device, bool register_ring) {
             DeviceLoaderOptions device_options;
             device_options.device = device;
             device_options.register_ring = register_ring;
             return new PyDeviceLoader(
                 std::move(client),
                 MakeStreamOptions(job, dataset, batch_size, seed, rank, world_size, epochs,
                                   shuffle, slots, sample_ids, coordinator),
                 device_options);
           }),
           py::arg("client"), py::arg("job"), py::arg("dataset"), py::arg("batch_size"),
           py::arg("seed"), py::arg("rank"), py::arg("world_size"), py::arg("epochs"),
           py::arg("shuffle"), py::arg("slots"), py::arg("sample_ids"), py::arg("coordinator"),
           py::arg("device"), py::arg("register_ring"))
      .def("next", &PyDeviceLoader::Next)
      .def_property_readonly("batches_per_epoch",
                             [](const PyDeviceLoader& l) { return l.loader().batches_per_epoch(); })
      .def_property_readonly("ended", [](const PyDeviceLoader& l) { return l.loader().ended(); })
      .def_property_readonly("device", [](const PyDeviceLoader& l) { return l.loader().device(); })
      .def_property_readonly("ring_registered",
                             [](const PyDeviceLoader& l) { return l.loader().ring_registered(); })
      .def_property_readonly("wait_seconds", [](const PyDeviceLoader& l) {
        return std::chrono::duration<double>(l.loader().reader().wait_time()).count();
      });
}

}  // namespace ember::python
