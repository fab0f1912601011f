#include "sdk/python/src/client_bindings.h"

#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/client.h"
#include "sdk/python/src/errors.h"

namespace ember::python {
namespace {

namespace py = pybind11;
using Release = py::call_guard<py::gil_scoped_release>;

// Seconds from Python as milliseconds; kInvalidArgument naming `what` if negative or NaN.
std::chrono::milliseconds Millis(double seconds, const char* what) {
  if (!(seconds >= 0) || seconds > 1e9)
    Raise(InvalidArgument(std::string(what) + " must be a number of seconds in [0, 1e9], not " +
                          std::to_string(seconds)));
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

std::string Repr(const DatasetInfo& d) {
  return "DatasetInfo(name='" + d.spec.name + "', format='" + d.spec.format + "', count=" +
         std::to_string(d.count) + ", path='" + d.spec.path + "')";
}

void BindRecords(py::module_& m) {
  py::class_<TensorInfo>(m, "TensorInfo", "One tensor of a dataset's samples.")
      .def_readonly("name", &TensorInfo::name)
      .def_readonly("dtype", &TensorInfo::dtype, "'uint8', 'float32', ...")
      .def_readonly("shape", &TensorInfo::shape, "Per sample (no batch dimension).")
      .def("__repr__", [](const TensorInfo& t) {
        std::string shape;
        for (int64_t d : t.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
        return "TensorInfo(name='" + t.name + "', dtype='" + t.dtype + "', shape=[" + shape + "])";
      });

  py::class_<DatasetInfo>(m, "DatasetInfo", "A registered dataset, as the daemon knows it.")
      .def_property_readonly("name", [](const DatasetInfo& d) { return d.spec.name; })
      .def_property_readonly("format", [](const DatasetInfo& d) { return d.spec.format; })
      .def_property_readonly("path", [](const DatasetInfo& d) { return d.spec.path; })
      .def_property_readonly("split", [](const DatasetInfo& d) { return d.spec.split; })
      .def_property_readonly("pipeline", [](const DatasetInfo& d) { return d.spec.pipeline; })
      .def_property_readonly("on_error", [](const DatasetInfo& d) { return d.spec.on_error; })
      .def_property_readonly("shared", [](const DatasetInfo& d) { return d.spec.shared; })
      .def_property_readonly("endpoint", [](const DatasetInfo& d) { return d.spec.endpoint; },
                             "An s3:// dataset's own S3 endpoint ('': emberd's).")
      .def_readonly("count", &DatasetInfo::count, "Samples.")
      .def_readonly("tensors", &DatasetInfo::tensors)
      .def_readonly("files", &DatasetInfo::files)
      .def_readonly("fingerprint", &DatasetInfo::fingerprint)
      .def_readonly("owner_uid", &DatasetInfo::owner_uid)
      .def("__repr__", &Repr);

  py::class_<StreamStatus>(m, "StreamStatus", "One rank's stream.")
      .def_readonly("stream_id", &StreamStatus::stream_id)
      .def_readonly("job", &StreamStatus::job)
      .def_readonly("rank", &StreamStatus::rank)
      .def_readonly("world_size", &StreamStatus::world_size)
      .def_readonly("dataset", &StreamStatus::dataset)
      .def_readonly("epoch", &StreamStatus::epoch)
      .def_readonly("batches_published", &StreamStatus::batches_published)
      .def_readonly("batches_consumed", &StreamStatus::batches_consumed)
      .def_readonly("samples_per_second", &StreamStatus::samples_per_second)
      .def_readonly("ring_fill", &StreamStatus::ring_fill)
      .def_readonly("slot_count", &StreamStatus::slot_count)
      .def_readonly("prefetch_depth", &StreamStatus::prefetch_depth)
      .def_readonly("slots_touched", &StreamStatus::slots_touched)
      .def_readonly("samples_skipped", &StreamStatus::samples_skipped)
      .def_readonly("samples_published", &StreamStatus::samples_published)
      .def_readonly("bytes_published", &StreamStatus::bytes_published)
      .def_readonly("decode_errors", &StreamStatus::decode_errors)
      .def_readonly("data_stall_seconds", &StreamStatus::data_stall_seconds)
      .def_readonly("share", &StreamStatus::share)
      .def_readonly("shared_batches", &StreamStatus::shared_batches)
      .def_readonly("remote_rows", &StreamStatus::remote_rows,
                    "Rows remote decode workers decoded for it.");

  py::class_<DecodeWorkerStatus>(
      m, "DecodeWorkerStatus",
      "A remote decode worker of the node (config decode_workers) and what it has done.")
      .def_readonly("address", &DecodeWorkerStatus::address, "HOST:PORT.")
      .def_readonly("up", &DecodeWorkerStatus::up,
                    "False: left out after a failed call until its retry.")
      .def_readonly("last_error", &DecodeWorkerStatus::last_error,
                    "Why its last failed call failed ('': none failed).")
      .def_readonly("calls", &DecodeWorkerStatus::calls)
      .def_readonly("rows", &DecodeWorkerStatus::rows, "Rows it decoded.")
      .def_readonly("bytes", &DecodeWorkerStatus::bytes, "Bytes of those rows.")
      .def_readonly("failed_calls", &DecodeWorkerStatus::failed_calls,
                    "Calls that failed (their rows were decoded on this node).")
      .def_readonly("rows_per_second", &DecodeWorkerStatus::rows_per_second,
                    "Its measured rate.")
      .def_readonly("share", &DecodeWorkerStatus::share,
                    "Its rows of all the rows the node's streams decoded (0..1).");

  py::class_<RankProgress>(m, "RankProgress", "Where one rank of a job stands.")
      .def_readonly("rank", &RankProgress::rank)
      .def_readonly("joined", &RankProgress::joined)
      .def_readonly("epoch", &RankProgress::epoch)
      .def_readonly("consumed", &RankProgress::consumed)
      .def_readonly("leased", &RankProgress::leased)
      .def_readonly("node", &RankProgress::node);

  py::class_<JobStatus>(m, "JobStatus", "One job (training run) and its ranks.")
      .def_readonly("job", &JobStatus::job)
      .def_readonly("world_size", &JobStatus::world_size)
      .def_readonly("dataset", &JobStatus::dataset)
      .def_readonly("epochs_started", &JobStatus::epochs_started)
      .def_readonly("batches_leased", &JobStatus::batches_leased)
      .def_readonly("batches_committed", &JobStatus::batches_committed)
      .def_readonly("batch_size", &JobStatus::batch_size)
      .def_readonly("batches_per_rank", &JobStatus::batches_per_rank)
      .def_readonly("ranks", &JobStatus::ranks)
      .def_readonly("ranks_unlisted", &JobStatus::ranks_unlisted)
      .def_readonly("ranks_joined", &JobStatus::ranks_joined)
      .def_readonly("coordinator", &JobStatus::coordinator)
      .def_readonly("leases_in_flight", &JobStatus::leases_in_flight);

  py::class_<DatasetDetails>(m, "DatasetDetails",
                             "A dataset with what it costs the node (emberctl dataset inspect).")
      .def_readonly("info", &DatasetDetails::info)
      .def_readonly("source", &DatasetDetails::source, "Its path, without credentials.")
      .def_readonly("shards", &DatasetDetails::shards)
      .def_readonly("index_bytes", &DatasetDetails::index_bytes,
                    "What its format holds in emberd's memory.")
      .def_readonly("remote", &DatasetDetails::remote, "Read through the node's shard cache.")
      .def_readonly("shards_cached", &DatasetDetails::shards_cached)
      .def_readonly("bytes_cached", &DatasetDetails::bytes_cached);

  py::class_<ShardCacheEntry>(m, "ShardCacheEntry", "A shard in the node's cache.")
      .def_readonly("url", &ShardCacheEntry::url)
      .def_readonly("dataset", &ShardCacheEntry::dataset)
      .def_readonly("bytes", &ShardCacheEntry::bytes)
      .def_readonly("in_use", &ShardCacheEntry::in_use);

  py::class_<ShardCacheStatus>(m, "ShardCacheStatus", "The node's shard cache (emberctl cache).")
      .def_readonly("limit_bytes", &ShardCacheStatus::limit_bytes)
      .def_readonly("bytes", &ShardCacheStatus::bytes)
      .def_readonly("entries", &ShardCacheStatus::entries)
      .def_readonly("hits", &ShardCacheStatus::hits)
      .def_readonly("misses", &ShardCacheStatus::misses)
      .def_readonly("fetched_bytes", &ShardCacheStatus::fetched_bytes)
      .def_readonly("evictions", &ShardCacheStatus::evictions)
      .def_readonly("damaged", &ShardCacheStatus::damaged)
      .def_readonly("range_reads", &ShardCacheStatus::range_reads)
      .def_readonly("range_bytes", &ShardCacheStatus::range_bytes)
      .def_readonly("listed", &ShardCacheStatus::listed)
      .def_readonly("entries_unlisted", &ShardCacheStatus::entries_unlisted)
      .def_readonly("bytes_unlisted", &ShardCacheStatus::bytes_unlisted);

  py::class_<ShardCacheCleared>(m, "ShardCacheCleared", "What clear_shard_cache() removed.")
      .def_readonly("entries", &ShardCacheCleared::entries)
      .def_readonly("bytes", &ShardCacheCleared::bytes)
      .def_readonly("in_use", &ShardCacheCleared::in_use);

  py::class_<RegistrationProgress>(m, "RegistrationProgress",
                                   "How far a registration running now has got.")
      .def_readonly("dataset", &RegistrationProgress::dataset)
      .def_readonly("shards_done", &RegistrationProgress::shards_done)
      .def_readonly("shards_total", &RegistrationProgress::shards_total)
      .def_readonly("bytes_done", &RegistrationProgress::bytes_done)
      .def_readonly("elapsed_seconds", &RegistrationProgress::elapsed_seconds);

  py::class_<PendingSegmentStatus>(m, "PendingSegmentStatus",
                                   "A shared-memory segment some ranks have not opened.")
      .def_readonly("job", &PendingSegmentStatus::job)
      .def_readonly("name", &PendingSegmentStatus::name)
      .def_readonly("world_size", &PendingSegmentStatus::world_size)
      .def_readonly("bytes", &PendingSegmentStatus::bytes)
      .def_readonly("missing_ranks", &PendingSegmentStatus::missing_ranks)
      .def_readonly("missing_unlisted", &PendingSegmentStatus::missing_unlisted)
      .def_readonly("age_seconds", &PendingSegmentStatus::age_seconds);

  py::class_<DaemonStatus>(m, "DaemonStatus", "What emberd serves (emberctl status).")
      .def_readonly("version", &DaemonStatus::version)
      .def_readonly("pid", &DaemonStatus::pid)
      .def_readonly("uptime_seconds", &DaemonStatus::uptime_seconds)
      .def_readonly("datasets", &DaemonStatus::datasets)
      .def_readonly("jobs", &DaemonStatus::jobs)
      .def_readonly("streams", &DaemonStatus::streams)
      .def_readonly("shm_bytes_in_use", &DaemonStatus::shm_bytes_in_use)
      .def_readonly("shm_bytes_budget", &DaemonStatus::shm_bytes_budget)
      .def_readonly("pending_segments", &DaemonStatus::pending_segments)
      .def_readonly("open_fds", &DaemonStatus::open_fds)
      .def_readonly("resident_bytes", &DaemonStatus::resident_bytes)
      .def_readonly("decode_workers", &DaemonStatus::decode_workers,
                    "The node's remote decode workers (config decode_workers).");
}

}  // namespace

void BindClient(py::module_& m) {
  BindRecords(m);
  py::class_<Client, std::shared_ptr<Client>>(m, "Client", R"doc(
A connection to the local emberd over its unix socket.

Client(socket=None, *, connect_timeout=5.0, call_timeout=0.0)

socket: the daemon's socket; None: $EMBER_SOCKET, else /run/ember/emberd.sock.
connect_timeout: seconds to wait for the daemon. call_timeout: seconds each call may take
(0: no limit). Raises ember.Unavailable naming the socket if the daemon cannot be reached.
Thread-safe; every call releases the GIL while it waits.)doc")
      .def(py::init([](std::optional<std::string> socket, double connect_timeout,
                       double call_timeout) {
             ClientOptions options;
             options.socket_path = socket.value_or("");
             options.connect_timeout = Millis(connect_timeout, "connect_timeout");
             options.call_timeout = Millis(call_timeout, "call_timeout");
             return std::shared_ptr<Client>(
                 ValueOrRaise(WithoutGil([&] { return Client::Connect(options); })));
           }),
           py::arg("socket") = py::none(), py::kw_only(), py::arg("connect_timeout") = 5.0,
           py::arg("call_timeout") = 0.0)
      .def_property_readonly("socket", &Client::socket_path, "The daemon's socket path.")
      .def_property_readonly("connected", &Client::connected,
                             "False once the connection to the daemon is lost.")
      .def(
          "add_dataset",
          [](Client& c, const std::string& name, const std::string& path,
             const std::string& format, const std::string& split, const std::string& pipeline,
             const std::string& on_error, bool shared, const std::string& shuffle,
             uint32_t shuffle_window, const std::string& endpoint) {
            DatasetSpec spec;
            spec.name = name;
            spec.path = path;
            spec.format = format;
            spec.split = split;
            spec.pipeline = pipeline;
            spec.on_error = on_error;
            spec.shared = shared;
            spec.shuffle = shuffle;
            spec.shuffle_window = shuffle_window;
            spec.endpoint = endpoint;
            return ValueOrRaise(WithoutGil([&] { return c.AddDataset(spec); }));
          },
          py::arg("name"), py::arg("path"), py::kw_only(), py::arg("format") = "idx",
          py::arg("split") = "train", py::arg("pipeline") = "", py::arg("on_error") = "fail",
          py::arg("shared") = false, py::arg("shuffle") = "samples", py::arg("shuffle_window") = 8,
          py::arg("endpoint") = "",
          R"doc(Registers a dataset (emberctl dataset add) and returns its DatasetInfo.

format: idx, images, packed, tokens (or a plugin's); split: train or test (idx);
pipeline: the YAML text of a decode/transform pipeline ('' : the format's default);
on_error: 'fail' or 'skip' a corrupt sample; shared: every user of the daemon may stream it;
shuffle: 'samples' (over the set) or 'shards' (shards permuted, samples mixed within windows
of shuffle_window shards: for shards read from remote storage through the node's cache);
endpoint: for an s3:// path, the S3 endpoint 'http(s)://HOST[:PORT]' its objects are read
from ('': emberd's; region and credentials stay emberd's own).
The daemon reads the files with the caller's rights. Raises ember.AlreadyExists,
ember.InvalidArgument (naming the file or field), ember.PermissionDenied.)doc")
      .def(
          "list_datasets",
          [](Client& c) { return ValueOrRaise(c.ListDatasets()); }, Release(),
          "The datasets the caller may see.")
      .def(
          "inspect_dataset",
          [](Client& c, const std::string& name) { return ValueOrRaise(c.InspectDataset(name)); },
          py::arg("name"), Release(), "One dataset; ember.NotFound if it is not registered.")
      .def(
          "describe_dataset",
          [](Client& c, const std::string& name) { return ValueOrRaise(c.DescribeDataset(name)); },
          py::arg("name"), Release(),
          "inspect_dataset's dataset with its source, shards, index memory and what the node's "
          "shard cache holds of it.")
      .def(
          "registration_progress",
          [](Client& c, const std::string& name) {
            return ValueOrRaise(c.GetRegistrationProgress(name));
          },
          py::arg("name"), Release(),
          "How far this user's registration of `name`, running now (e.g. on another thread), has "
          "got; ember.NotFound when none is.")
      .def(
          "shard_cache", [](Client& c) { return ValueOrRaise(c.GetShardCache()); }, Release(),
          "The node's shard cache: totals, counters and the entries of datasets you may read.")
      .def(
          "clear_shard_cache", [](Client& c) { return ValueOrRaise(c.ClearShardCache()); },
          Release(),
          "Removes the cache's entries no reader holds (root and emberd's own user only: "
          "ember.PermissionDenied otherwise).")
      .def(
          "remove_dataset",
          [](Client& c, const std::string& name) { OkOrRaise(c.RemoveDataset(name)); },
          py::arg("name"), Release(), "Removes a dataset from the catalog (not its files).")
      .def(
          "status", [](Client& c) { return ValueOrRaise(c.GetStatus()); }, Release(),
          "The daemon's DaemonStatus (emberctl status): datasets, jobs, streams, memory.")
      .def(
          "kv_set",
          [](Client& c, const std::string& job, const std::string& key, const py::bytes& value) {
            std::string bytes = value;
            py::gil_scoped_release release;
            OkOrRaise(c.KvSet(job, key, bytes));
          },
          py::arg("job"), py::arg("key"), py::arg("value"),
          "Sets `key` in the job's rendezvous store (shared by its ranks on every node).")
      .def(
          "kv_get",
          [](Client& c, const std::string& job, const std::string& key, double timeout) {
            const auto wait = Millis(timeout, "timeout");
            return py::bytes(ValueOrRaise(WithoutGil([&] { return c.KvGet(job, key, wait); })));
          },
          py::arg("job"), py::arg("key"), py::arg("timeout"),
          "The value of `key`, waiting up to `timeout` seconds for it to be set "
          "(ember.DeadlineExceeded naming the key after that).")
      .def(
          "kv_add",
          [](Client& c, const std::string& job, const std::string& key, int64_t delta) {
            return ValueOrRaise(c.KvAdd(job, key, delta));
          },
          py::arg("job"), py::arg("key"), py::arg("delta"), Release(),
          "Adds `delta` to the decimal integer at `key` (0 if unset) and returns the sum.")
      .def(
          "kv_check",
          [](Client& c, const std::string& job, const std::vector<std::string>& keys) {
            return ValueOrRaise(c.KvCheck(job, keys));
          },
          py::arg("job"), py::arg("keys"), Release(), "True if every key is set.")
      .def(
          "kv_delete",
          [](Client& c, const std::string& job, const std::string& key) {
            return ValueOrRaise(c.KvDelete(job, key));
          },
          py::arg("job"), py::arg("key"), Release(), "Deletes `key`; True if it was set.")
      .def(
          "barrier",
          [](Client& c, const std::string& job, const std::string& name, uint32_t world_size,
             double timeout) {
            const auto wait = Millis(timeout, "timeout");
            py::gil_scoped_release release;
            OkOrRaise(c.Barrier(job, name, world_size, wait));
          },
          py::arg("job"), py::arg("name"), py::arg("world_size"), py::arg("timeout"),
          "Returns once `world_size` callers reached barrier `name` of `job` "
          "(ember.DeadlineExceeded after `timeout` seconds).");
}

}  // namespace ember::python
