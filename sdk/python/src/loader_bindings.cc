#include "sdk/python/src/loader_bindings.h"

#include <dlpack/dlpack.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/client.h"
#include "ember/launch_env.h"
#include "ember/loader_state.h"
#include "ember/raw_loader.h"
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

DLDataType ToDlpack(ring::DType dtype) {
  switch (dtype) {
    case ring::DType::kUInt8: return {kDLUInt, 8, 1};
    case ring::DType::kInt8: return {kDLInt, 8, 1};
    case ring::DType::kUInt16: return {kDLUInt, 16, 1};
    case ring::DType::kInt16: return {kDLInt, 16, 1};
    case ring::DType::kInt32: return {kDLInt, 32, 1};
    case ring::DType::kInt64: return {kDLInt, 64, 1};
    case ring::DType::kFloat32: return {kDLFloat, 32, 1};
    case ring::DType::kFloat64: return {kDLFloat, 64, 1};
  }
  Raise(Internal("ring dtype " + std::to_string(static_cast<int>(dtype)) + " has no DLPack type"));
}

// What a DLPack capsule of a slot tensor owns: the batch's slot, until its consumer (or the
// capsule, if never consumed) calls the deleter. The deleter may run on any thread,
// without the GIL: it only drops the slot (StreamReader's handles are thread-safe).
struct DlpackContext {
  std::shared_ptr<SlotHandle> slot;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements, row-major
  DLManagedTensor managed{};
};

void DeleteDlpackContext(DLManagedTensor* managed) {
  delete static_cast<DlpackContext*>(managed->manager_ctx);
}

// A capsule not consumed (still named "dltensor") owns its tensor.
void DeleteUnconsumedCapsule(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

// One tensor of a batch, as DLPack (`__dlpack__`, `__dlpack_device__`): torch, numpy, JAX
// and CuPy make their arrays of it with their own from_dlpack, viewing the ring slot (no
// copy). It and every capsule made of it hold the batch's slot; the slot goes back to the
// daemon once the last of them (and what consumers made of the capsules) is gone.
class SlotTensor {
 public:
  SlotTensor(RawTensor tensor, std::shared_ptr<SlotHandle> slot)
      : tensor_(std::move(tensor)), slot_(std::move(slot)) {}

  // A new capsule (DLPack's "dltensor") for one consumer. `stream` is for device arrays;
  // these are host memory, so any value is accepted and ignored.
  py::capsule Dlpack(const py::object& /*stream*/) const { return Capsule(tensor_, slot_); }

  // A capsule of `tensor` holding `slot`.
  static py::capsule Capsule(const RawTensor& tensor, const std::shared_ptr<SlotHandle>& slot) {
    const DLDataType dtype = ToDlpack(tensor.dtype);  // may raise: before anything is owned
    auto* context = new DlpackContext{slot, tensor.shape, {}, {}};
    context->strides.resize(context->shape.size());
    int64_t stride = 1;
    for (size_t i = context->shape.size(); i-- > 0;) {
      context->strides[i] = stride;
      stride *= context->shape[i];
    }
    DLTensor& t = context->managed.dl_tensor;
    t.data = tensor.data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(context->shape.size());
    t.dtype = dtype;
    t.shape = context->shape.data();
    t.strides = context->strides.data();
    t.byte_offset = 0;
    context->managed.manager_ctx = context;
    context->managed.deleter = &DeleteDlpackContext;
    PyObject* capsule = PyCapsule_New(&context->managed, "dltensor", &DeleteUnconsumedCapsule);
    if (capsule == nullptr) {
      delete context;
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::capsule>(capsule);
  }

  const RawTensor& tensor() const { return tensor_; }

 private:
  RawTensor tensor_;
  std::shared_ptr<SlotHandle> slot_;
};

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
        WithoutGil([&] { return RawLoader::Open(*client_, options, resume, reconnect); }));
  }

  // (SlotTensors by name, epoch, step, last_in_epoch), or None at the end of an epoch;
  // with `capsules`, DLPack capsules in place of the SlotTensors (one consumer each, a
  // step less for torch.from_dlpack's C half).
  py::object Next(bool capsules) {
    Result<std::optional<RawBatch>> next =
        WithoutGil([&] { return loader_->TryNext(&CheckSignals); });
    if (!next.ok()) RaiseAfterWait(next.status());
    if (!next->has_value()) return py::none();
    RawBatch& batch = **next;
    py::dict tensors;
    for (RawTensor& tensor : batch.tensors) {
      const std::string name = tensor.name;
      if (capsules) {
        tensors[py::str(name)] = SlotTensor::Capsule(tensor, batch.slot);
      } else {
        tensors[py::str(name)] = SlotTensor(std::move(tensor), batch.slot);
      }
    }
    return py::make_tuple(tensors, batch.epoch, batch.index_in_epoch, batch.last_in_epoch);
  }

  const RawLoader& loader() const { return *loader_; }

 private:
  std::shared_ptr<Client> client_;  // outlives loader_
  std::unique_ptr<RawLoader> loader_;
};

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
                                uint32_t slots, bool sample_ids, const std::string& coordinator,
                                const std::string& share) {
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
  options.share = share;
  return options;
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
                       std::optional<LoaderState> resume, double reconnect_timeout,
                       const std::string& share) {
             return new PyLoader(std::move(client),
                                 MakeStreamOptions(job, dataset, batch_size, seed, rank,
                                                   world_size, epochs, shuffle, slots,
                                                   sample_ids, coordinator, share),
                                 resume, reconnect_timeout);
           }),
           py::arg("client"), py::arg("job"), py::arg("dataset"), py::arg("batch_size"),
           py::arg("seed"), py::arg("rank"), py::arg("world_size"), py::arg("epochs"),
           py::arg("shuffle"), py::arg("slots"), py::arg("sample_ids"), py::arg("coordinator"),
           py::arg("resume"), py::arg("reconnect_timeout"), py::arg("share") = "")
      .def("next", &PyLoader::Next, py::arg("capsules") = false)
      .def_property_readonly("state", [](const PyLoader& l) { return l.loader().state(); })
      .def_property_readonly("start_epoch",
                             [](const PyLoader& l) { return l.loader().start_epoch(); })
      .def_property_readonly("end_epoch",
                             [](const PyLoader& l) { return l.loader().end_epoch(); })
      .def_property_readonly("batches_per_epoch",
                             [](const PyLoader& l) { return l.loader().batches_per_epoch(); })
      .def_property_readonly("ended", [](const PyLoader& l) { return l.loader().ended(); })
      .def_property_readonly("reconnects", [](const PyLoader& l) { return l.loader().reconnects(); })
      .def_property_readonly("wait_seconds",
                             [](const PyLoader& l) {
                               return std::chrono::duration<double>(l.loader().wait_time()).count();
                             })
      .def_property_readonly("batches_read",
                             [](const PyLoader& l) { return l.loader().batches_read(); })
      // (address, bytes, slots) of the open stream's ring mapping, for ember.DeviceLoader
      // to page-lock it (cudaHostRegister); valid while the loader is open and has not
      // reconnected (a reconnect maps a new ring).
      .def_property_readonly("ring", [](const PyLoader& l) {
        const StreamReader& reader = l.loader().reader();
        return py::make_tuple(reinterpret_cast<uintptr_t>(reader.ring_base()), reader.ring_size(),
                              reader.info().slot_count);
      });

  py::class_<SlotTensor>(m, "SlotTensor",
                         "One tensor of a batch as DLPack, viewing its ring slot (no copy).")
      .def("__dlpack__", &SlotTensor::Dlpack, py::kw_only(), py::arg("stream") = py::none())
      .def("__dlpack_device__", [](const SlotTensor&) { return py::make_tuple(int{kDLCPU}, 0); })
      .def_property_readonly("name", [](const SlotTensor& t) { return t.tensor().name; })
      .def_property_readonly("shape", [](const SlotTensor& t) {
        return py::tuple(py::cast(t.tensor().shape));
      })
      .def_property_readonly("nbytes", [](const SlotTensor& t) { return t.tensor().nbytes; })
      .def_property_readonly("data_ptr", [](const SlotTensor& t) {
        return reinterpret_cast<uintptr_t>(t.tensor().data);
      });
  m.def("read_launch_env", &LaunchEnvDict, py::arg("default_job"),
        "Rank, world size and job from ember-run's, torchrun's or Slurm's variables, with "
        "ember/launch_env.h's precedence, as a dict.");
}

}  // namespace ember::python
