#include "sdk/python/src/loader_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/core/CPUAllocator.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "ember/client.h"
#include "ember/launch_env.h"
#include "ember/loader.h"
#include "ember/loader_state.h"
#include "sdk/python/src/errors.h"

namespace ember::python {
namespace {

namespace py = pybind11;

// While a wait runs without the GIL: takes it every 100 ms to let Python run its signal
// handlers; a handler that raised (KeyboardInterrupt) ends the wait, its error left set.
Status CheckSignals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) return Cancelled("interrupted by a signal");
  return Status::Ok();
}

// Raises the Python error a signal handler left (CheckSignals), else `status`.
[[noreturn]] void RaiseAfterWait(const Status& status) {
  if (PyErr_Occurred() != nullptr) throw py::error_already_set();
  Raise(status);
}

class PyLoader {
 public:
  PyLoader(std::shared_ptr<Client> client, const StreamOptions& options,
           const std::optional<LoaderState>& resume, double reconnect_timeout)
      : client_(std::move(client)) {
    if (!(reconnect_timeout >= 0) || reconnect_timeout > 1e9)
      Raise(InvalidArgument("reconnect_timeout must be a number of seconds in [0, 1e9], not " +
                            std::to_string(reconnect_timeout)));
    const std::chrono::milliseconds reconnect(
        static_cast<int64_t>(std::llround(reconnect_timeout * 1000)));
    loader_ = ValueOrRaise(
        WithoutGil([&] { return Loader::Open(*client_, options, resume, reconnect); }));
  }

  // (tensors by name, epoch, step, last_in_epoch), or None at the end of an epoch.
  py::object Next() {
    Result<std::optional<Batch>> next = WithoutGil([&] { return loader_->TryNext(&CheckSignals); });
    if (!next.ok()) RaiseAfterWait(next.status());
    if (!next->has_value()) return py::none();
    return BatchTuple(**next);
  }

  const Loader& loader() const { return *loader_; }

 private:
  std::shared_ptr<Client> client_;  // outlives loader_
  std::unique_ptr<Loader> loader_;
};

// Hands the slots of `tensors` back now. A tensor that only `tensors` holds is dropped;
// one that something else still sees (another reference, a view of its storage) first
// gets a private copy of its data, so it stays valid and the ring slot is not read again.
void ReleaseTensors(py::list tensors) {
  for (py::handle item : tensors) {
    if (!THPVariable_Check(item.ptr()))
      Raise(InvalidArgument("release_tensors: not a tensor: " + std::string(py::repr(item))));
    const at::Tensor& tensor = THPVariable_Unpack(item.ptr());
    if (!tensor.is_cpu()) continue;  // a DeviceLoader's: its own device memory
    const c10::Storage& storage = tensor.unsafeGetTensorImpl()->unsafe_storage();
    const bool seen_elsewhere =
        Py_REFCNT(item.ptr()) > 1 || tensor.use_count() > 1 || storage.use_count() > 1;
    if (!seen_elsewhere) continue;
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    const size_t nbytes = impl->nbytes();
    at::DataPtr copy = c10::GetCPUAllocator()->allocate(nbytes);
    if (nbytes > 0) std::memcpy(copy.get(), impl->data_ptr().get(), nbytes);
    impl->set_data_ptr(std::move(copy));  // the old DataPtr (holding the slot) goes
  }
  tensors.attr("clear")();
}

py::dict LaunchEnvDict(const std::string& default_job) {
  LaunchEnv env = ValueOrRaise(ReadLaunchEnv(default_job));
  py::dict d;
  d["rank"] = env.rank;
  d["world_size"] = env.world_size;
  d["local_rank"] = env.local_rank;
  d["local_world_size"] = env.local_world_size;
  d["node_rank"] = env.node_rank;
  d["num_nodes"] = env.num_nodes;
  d["restart_count"] = env.restart_count;
  d["job"] = env.job;
  d["coordinator"] = env.coordinator;
  d["master_addr"] = env.master_addr;
  d["launcher"] = env.launcher;
  return d;
}

}  // namespace

StreamOptions MakeStreamOptions(const std::string& job, const std::string& dataset,
                                uint32_t batch_size, uint64_t seed, uint32_t rank,
                                uint32_t world_size, uint32_t epochs, bool shuffle,
                                uint32_t slots, bool sample_ids, const std::string& coordinator) {
  StreamOptions options;
  options.job = job;
  options.dataset = dataset;
  options.batch_size = batch_size;
  options.seed = seed;
  options.rank = rank;
  options.world_size = world_size;
  options.epochs = epochs;
  options.shuffle = shuffle;
  options.slots = slots;
  options.sample_ids = sample_ids;
  options.coordinator = coordinator;
  return options;
}

py::tuple BatchTuple(Batch& batch) {
  py::dict tensors;
  for (size_t i = 0; i < batch.names.size(); ++i)
    tensors[py::str(batch.names[i])] = py::cast(std::move(batch.tensors[i]));
  return py::make_tuple(tensors, batch.epoch, batch.index_in_epoch, batch.last_in_epoch);
}

void BindLoader(py::module_& m) {
  py::class_<LoaderState>(m, "LoaderState",
                          "Where a job stands in its data (ember/loader_state.h).")
      .def(py::init([](uint64_t fingerprint, uint64_t seed, uint64_t epoch, uint64_t position) {
             return LoaderState{fingerprint, seed, epoch, position};
           }),
           py::kw_only(), py::arg("fingerprint"), py::arg("seed"), py::arg("epoch"),
           py::arg("position"))
      .def_readonly("fingerprint", &LoaderState::fingerprint)
      .def_readonly("seed", &LoaderState::seed)
      .def_readonly("epoch", &LoaderState::epoch)
      .def_readonly("position", &LoaderState::position)
      .def("to_string", &LoaderState::ToString)
      .def_static(
          "parse", [](const std::string& text) { return ValueOrRaise(LoaderState::Parse(text)); },
          py::arg("text"))
      .def("__eq__", &LoaderState::operator==)
      .def("__repr__", &LoaderState::ToString);

  py::class_<PyLoader>(m, "_Loader")
      .def(py::init([](std::shared_ptr<Client> client, const std::string& job,
                       const std::string& dataset, uint32_t batch_size, uint64_t seed,
                       uint32_t rank, uint32_t world_size, uint32_t epochs, bool shuffle,
                       uint32_t slots, bool sample_ids, const std::string& coordinator,
                       std::optional<LoaderState> resume, double reconnect_timeout) {
             return new PyLoader(std::move(client),
                                 MakeStreamOptions(job, dataset, batch_size, seed, rank,
                                                   world_size, epochs, shuffle, slots,
                                                   sample_ids, coordinator),
                                 resume, reconnect_timeout);
           }),
           py::arg("client"), py::arg("job"), py::arg("dataset"), py::arg("batch_size"),
           py::arg("seed"), py::arg("rank"), py::arg("world_size"), py::arg("epochs"),
           py::arg("shuffle"), py::arg("slots"), py::arg("sample_ids"), py::arg("coordinator"),
           py::arg("resume"), py::arg("reconnect_timeout"))
      .def("next", &PyLoader::Next)
      .def_property_readonly("state", [](const PyLoader& l) { return l.loader().state(); })
      .def_property_readonly("batches_per_epoch",
                             [](const PyLoader& l) { return l.loader().batches_per_epoch(); })
      .def_property_readonly("ended", [](const PyLoader& l) { return l.loader().ended(); })
      .def_property_readonly("reconnects", [](const PyLoader& l) { return l.loader().reconnects(); })
      .def_property_readonly("wait_seconds",
                             [](const PyLoader& l) {
                               return std::chrono::duration<double>(l.loader().wait_time()).count();
                             })
      .def_property_readonly("batches_read",
                             [](const PyLoader& l) { return l.loader().batches_read(); });

  m.def("release_tensors", &ReleaseTensors, py::arg("tensors"),
        "Hands the ring slot of a batch's tensors back now (see Batch.release).");
  m.def("read_launch_env", &LaunchEnvDict, py::arg("default_job"),
        "Rank, world size and job from ember-run's, torchrun's or Slurm's variables, with "
        "ember/launch_env.h's precedence, as a dict.");
}

}  // namespace ember::python
