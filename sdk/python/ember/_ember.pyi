"""Type stubs of the extension module ember._ember (sdk/python/src)."""

from typing import Any, Dict, List, Optional, Tuple

class TensorInfo:
    name: str
    dtype: str
    shape: List[int]

class DatasetInfo:
    name: str
    format: str
    path: str
    split: str
    pipeline: str
    on_error: str
    shared: bool
    endpoint: str
    count: int
    tensors: List[TensorInfo]
    files: List[str]
    fingerprint: int
    owner_uid: int

class StreamStatus:
    stream_id: int
    job: str
    rank: int
    world_size: int
    dataset: str
    epoch: int
    batches_published: int
    batches_consumed: int
    samples_per_second: float
    ring_fill: float
    slot_count: int
    prefetch_depth: int
    slots_touched: int
    samples_skipped: int
    samples_published: int
    bytes_published: int
    decode_errors: int
    data_stall_seconds: float
    share: str
    shared_batches: int
    remote_rows: int

class DecodeWorkerStatus:
    address: str
    up: bool
    last_error: str
    calls: int
    rows: int
    bytes: int
    failed_calls: int
    rows_per_second: float
    share: float

class RankProgress:
    rank: int
    joined: bool
    epoch: int
    consumed: int
    leased: int
    node: str

class JobStatus:
    job: str
    world_size: int
    dataset: str
    epochs_started: int
    batches_leased: int
    batches_committed: int
    batch_size: int
    batches_per_rank: int
    ranks: List[RankProgress]
    coordinator: str
    leases_in_flight: int

class PendingSegmentStatus:
    job: str
    name: str
    world_size: int
    bytes: int
    missing_ranks: List[int]
    age_seconds: float

class DatasetDetails:
    info: DatasetInfo
    source: str
    shards: int
    index_bytes: int
    remote: bool
    shards_cached: int
    bytes_cached: int

class ShardCacheEntry:
    url: str
    dataset: str
    bytes: int
    in_use: bool

class ShardCacheStatus:
    limit_bytes: int
    bytes: int
    entries: int
    hits: int
    misses: int
    fetched_bytes: int
    evictions: int
    damaged: int
    range_reads: int
    range_bytes: int
    listed: List[ShardCacheEntry]
    entries_unlisted: int
    bytes_unlisted: int

class ShardCacheCleared:
    entries: int
    bytes: int
    in_use: int

class RegistrationProgress:
    dataset: str
    shards_done: int
    shards_total: int
    bytes_done: int
    elapsed_seconds: float

class DaemonStatus:
    version: str
    pid: int
    uptime_seconds: float
    datasets: List[DatasetInfo]
    jobs: List[JobStatus]
    streams: List[StreamStatus]
    shm_bytes_in_use: int
    shm_bytes_budget: int
    pending_segments: List[PendingSegmentStatus]
    open_fds: int
    resident_bytes: int
    decode_workers: List[DecodeWorkerStatus]

class Client:
    def __init__(self, socket: Optional[str] = None, *, connect_timeout: float = 5.0,
                 call_timeout: float = 0.0) -> None: ...
    @property
    def socket(self) -> str: ...
    @property
    def connected(self) -> bool: ...
    def add_dataset(self, name: str, path: str, *, format: str = "idx", split: str = "train",
                    pipeline: str = "", on_error: str = "fail",
                    shared: bool = False, shuffle: str = "samples", shuffle_window: int = 8,
                    endpoint: str = "") -> DatasetInfo: ...
    def list_datasets(self) -> List[DatasetInfo]: ...
    def inspect_dataset(self, name: str) -> DatasetInfo: ...
    def describe_dataset(self, name: str) -> DatasetDetails: ...
    def registration_progress(self, name: str) -> RegistrationProgress: ...
    def shard_cache(self) -> ShardCacheStatus: ...
    def clear_shard_cache(self) -> ShardCacheCleared: ...
    def remove_dataset(self, name: str) -> None: ...
    def status(self) -> DaemonStatus: ...
    def kv_set(self, job: str, key: str, value: bytes) -> None: ...
    def kv_get(self, job: str, key: str, timeout: float) -> bytes: ...
    def kv_add(self, job: str, key: str, delta: int) -> int: ...
    def kv_check(self, job: str, keys: List[str]) -> bool: ...
    def kv_delete(self, job: str, key: str) -> bool: ...
    def barrier(self, job: str, name: str, world_size: int, timeout: float) -> None: ...

class LoaderState:
    fingerprint: int
    seed: int
    epoch: int
    position: int
    def __init__(self, *, fingerprint: int, seed: int, epoch: int, position: int) -> None: ...
    def to_string(self) -> str: ...
    @staticmethod
    def parse(text: str) -> "LoaderState": ...

class SlotTensor:
    name: str
    shape: Tuple[int, ...]
    nbytes: int
    data_ptr: int
    def __dlpack__(self, *, stream: Any = None) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

class _Loader:
    def __init__(self, client: Client, job: str, dataset: str, batch_size: int, seed: int,
                 rank: int, world_size: int, epochs: int, shuffle: bool, slots: int,
                 sample_ids: bool, coordinator: str, resume: Optional[LoaderState],
                 reconnect_timeout: float, share: str = "") -> None: ...
    def next(self, capsules: bool = False) -> Optional[Tuple[Dict[str, Any], int, int, bool]]: ...
    state: LoaderState
    start_epoch: int
    end_epoch: int
    batches_per_epoch: int
    ended: bool
    reconnects: int
    wait_seconds: float
    batches_read: int
    ring: Tuple[int, int, int]

def read_launch_env(default_job: str) -> Dict[str, Any]: ...
