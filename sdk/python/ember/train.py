"""ember.train: distributed data-parallel training without the DDP plumbing.

    import ember.train as et

    def train_loop(config):
        model = et.prepare(Net())                        # process group, device, DDP
        loader = et.loader("train", batch_size=64)        # job, rank, world size, seed set
        start = et.get_checkpoint()                       # the latest reported, or None
        ...
        for epoch in range(first, config["epochs"]):
            for batch in loader:
                ...
            et.report({"epoch": epoch, "loss": loss}, checkpoint={"model": ...})

    result = et.run(train_loop, workers=2, config={"epochs": 2},
                    datasets={"train": "fmnist-train"}, checkpoint_dir="ckpt",
                    max_failures=1)
    print(result.metrics, result.checkpoint, result.restarts)

``run`` starts ``workers`` processes on this node, each calling ``train_loop(config)`` as one
rank of the job (torch.distributed through emberd: no MASTER_ADDR / MASTER_PORT), and
returns a ``Result`` once every worker has returned. Under a launcher (ember-run, torchrun,
srun) it runs the loop in the calling process only, as the rank the launcher made it.

Several nodes: call ``run`` on each with the same ``job``, ``nodes=N``, its ``node_rank``
and the ``coordinator`` (HOST:PORT of one node's emberd peer port), as ``ember-run
--nnodes`` takes them; node k's workers are ranks k*workers .. (k+1)*workers-1. Each node
restarts its own workers: a failure on one node fails the others' collectives, so every
node restarts, under the same attempt's job. checkpoint_dir must then be one directory
that every node sees (a shared file system); rank 0 (node 0) writes it, and ``Result``
carries rank 0's metrics and value on node 0 only.

Checkpoints: ``report(metrics, checkpoint=obj)`` has rank 0 write ``obj`` with every
``loader``'s state to ``checkpoint_dir/checkpoint-<step>.pt`` atomically (a kill during the
write leaves the previous one whole), keeping the last ``keep_checkpoints``. When a worker
fails (an exception, a signal), the others are stopped and, up to ``max_failures`` times,
all start again from the latest checkpoint: ``get_checkpoint()`` returns it and each
``loader`` resumes where it stood then, so every sample of an epoch is consumed once by
the model that the run ends with. Past ``max_failures``, ``run`` raises ``TrainingFailed``
with the worker's traceback.

GPU idle: with a worker's model on a CUDA device (``prepare``), each wait of its loaders
is bracketed by two CUDA events on the current stream; the GPU time between them is time
the GPU had no work because the batch had not come (``WorkerStats.gpu_idle_seconds``,
None without CUDA).

Metrics: each ``report`` of rank 0 appends a JSON line (step, time, the metrics, the data
stall so far) to ``metrics_path`` (default: ``checkpoint_dir/metrics.jsonl`` when there is
a checkpoint_dir) and prints it, or on a terminal a progress line (epoch, step/steps,
samples/s, data stall, ETA) when the metrics carry ``epoch`` and the loaders know their
length.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import json
import multiprocessing
import multiprocessing.connection
import os
import re
import signal
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional

from . import _ember
from ._errors import Error, FailedPrecondition, InvalidArgument
from ._loader import Loader, default_run

# How long a stopped worker gets to exit after SIGTERM before SIGKILL.
_STOP_GRACE_SECONDS = 10.0
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)\.pt$")


class TrainingFailed(Error):
    """A worker failed more often than max_failures allows: ``error`` is its traceback (or
    how it died), ``result`` what the run had reached."""

    def __init__(self, message: str, error: str, result: "Result") -> None:
        super().__init__(message)
        self.error = error
        self.result = result


@dataclasses.dataclass
class WorkerStats:
    """One worker's last attempt: its rank, seconds in train_loop, seconds it waited for
    batches (every loader it made), batches it took, and seconds its GPU had no work while
    it waited (None: not on a CUDA device)."""
    rank: int
    seconds: float = 0.0
    data_stall_seconds: float = 0.0
    batches: int = 0
    gpu_idle_seconds: Optional[float] = None


@dataclasses.dataclass
class Result:
    """What ``run`` returns: rank 0's last reported metrics, the latest checkpoint's path
    (or None), how many times the workers were started again, what train_loop returned on
    rank 0, and per-worker stats of the last attempt."""
    metrics: Dict[str, Any] = dataclasses.field(default_factory=dict)
    checkpoint: Optional[str] = None
    restarts: int = 0
    value: Any = None
    workers: List[WorkerStats] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Context:
    """The calling worker's place in the run (``get_context()``)."""
    rank: int
    world_size: int
    local_rank: int
    job: str        # this attempt's: loaders' jobs and the process group's store are under it
    attempt: int    # 0, then 1 after the first restart, ...
    backend: str


class _GpuIdleMeter:
    """GPU time without work during loader waits: an event on the current CUDA stream as a
    wait begins (it completes when the work queued before it does) and one as it ends (it
    completes at once if the GPU is idle by then); the time between them on the GPU is the
    time it sat idle for want of the batch. `make_event`: a timing CUDA event (tests give
    another with record / query / synchronize / elapsed_time in milliseconds)."""

    _MAX_PENDING = 64  # pairs not yet complete; past it the oldest is waited for

    def __init__(self, make_event: Callable[[], Any]) -> None:
        self._make_event = make_event
        self._pending: Any = collections.deque()
        self._begun: Any = None
        self._seconds = 0.0

    def begin(self) -> None:
        self._collect(wait=False)
        self._begun = self._make_event()
        self._begun.record()

    def end(self) -> None:
        if self._begun is None:
            return
        ended = self._make_event()
        ended.record()
        self._pending.append((self._begun, ended))
        self._begun = None
        if len(self._pending) > self._MAX_PENDING:
            self._pending[0][1].synchronize()

    def seconds(self, wait: bool = True) -> float:
        """Idle seconds so far: of every wait (`wait`: blocks until the GPU reached the last
        one's end), else of those the GPU has reached."""
        self._collect(wait)
        return self._seconds

    def _collect(self, wait: bool) -> None:
        while self._pending:
            begun, ended = self._pending[0]
            if wait:
                ended.synchronize()
            elif not ended.query():
                return
            self._pending.popleft()
            self._seconds += max(0.0, begun.elapsed_time(ended)) / 1000.0


class _Session:
    """The state of ember.train inside one worker process."""

    def __init__(self, context: Context, config: Dict[str, Any], datasets: Dict[str, str],
                 seed: int, checkpoint_dir: Optional[str], checkpoint_every: Optional[int],
                 keep: int, metrics_path: Optional[str], resume: Optional[str],
                 channel: Any) -> None:
        self.context = context
        self.config = config
        self.datasets = datasets
        self.seed = seed
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.keep = keep
        self.metrics_path = metrics_path
        self.channel = channel  # to run()'s process; None under a launcher
        self.loaders: Dict[str, Loader] = {}
        self.gpu_meter: Optional[_GpuIdleMeter] = None  # once prepare() put a model on CUDA
        self.resumed: Optional[Dict[str, Any]] = None
        self.step = 0
        self.started = time.monotonic()
        self.last_report = (time.monotonic(), 0, 0)  # (time, samples, batches) then
        self.progress_open = False
        if resume:
            self.resumed = _load(resume)
            self.step = int(self.resumed.get("step", 0))

    def batches(self) -> int:
        return sum(int(l.stats()["batches"]) for l in self.loaders.values())

    def samples(self) -> int:
        """Samples the whole job took so far: this worker's batches x batch size x ranks."""
        return sum(int(l.stats()["batches"]) * l.batch_size * l.world_size
                   for l in self.loaders.values())

    def stall(self) -> float:
        return sum(float(l.stats()["data_stall_seconds"]) for l in self.loaders.values())

    def gpu_idle(self) -> Optional[float]:
        return None if self.gpu_meter is None else self.gpu_meter.seconds()

    def stats(self, rank: int) -> WorkerStats:
        return WorkerStats(rank, time.monotonic() - self.started, self.stall(), self.batches(),
                           self.gpu_idle())


_session: Optional[_Session] = None


def _current(what: str) -> _Session:
    if _session is None:
        raise FailedPrecondition(f"ember.train.{what} is for a train_loop that ember.train.run "
                                 f"started")
    return _session


def get_context() -> Context:
    """The calling worker's rank, world size, local rank, job and attempt."""
    return _current("get_context").context


def _torch():
    import torch  # noqa: F401 (ember imports without torch; ember.train needs it)
    return torch


def prepare(model: Any, *, device: Optional[str] = None) -> Any:
    """``model`` ready for data-parallel training: the process group formed through emberd
    (once), the model on this worker's device (with backend "nccl": cuda:<local rank>; else
    the CPU, or ``device``) and wrapped in DistributedDataParallel."""
    s = _current("prepare")
    torch = _torch()
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from ._distributed import init_process_group
    if not dist.is_initialized():
        init_process_group(s.context.backend)
    if device is None and s.context.backend == "nccl":
        device = f"cuda:{s.context.local_rank}"
    if device is not None and device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
        if s.gpu_meter is None:
            s.gpu_meter = _GpuIdleMeter(lambda: torch.cuda.Event(enable_timing=True))
            for made in s.loaders.values():
                made._wait_meter = s.gpu_meter
    if device is not None:
        model = model.to(device)
    ids = [torch.device(device).index] if device is not None and device.startswith("cuda") else None
    return DistributedDataParallel(model, device_ids=ids)


def loader(name: str, batch_size: int, **kwargs: Any) -> Loader:
    """An ``ember.Loader`` of dataset ``datasets[name]`` (or ``name`` itself, registered or a
    path) for this worker: the job (this attempt's), rank, world size and seed (run's) set;
    resumed where the latest checkpoint left it. Other arguments go to ``ember.Loader``.
    One per name: a second call returns the first."""
    s = _current("loader")
    if name in s.loaders:
        return s.loaders[name]
    for fixed in ("job", "rank", "world_size"):
        if fixed in kwargs:
            raise InvalidArgument(f"ember.train.loader sets {fixed} itself")
    kwargs.setdefault("seed", s.seed)
    made = Loader(s.datasets.get(name, name), batch_size, job=f"{s.context.job}.{name}",
                  rank=s.context.rank, world_size=s.context.world_size, **kwargs)
    if s.resumed is not None and name in s.resumed.get("loaders", {}):
        made.load_state_dict(s.resumed["loaders"][name])
    made._wait_meter = s.gpu_meter
    s.loaders[name] = made
    return made


def get_checkpoint() -> Any:
    """What the latest reported checkpoint held (``report(checkpoint=...)``), or None."""
    s = _current("get_checkpoint")
    return None if s.resumed is None else s.resumed.get("checkpoint")


def load_checkpoint(path: str) -> Any:
    """What ``report(checkpoint=...)`` wrote to the checkpoint file ``path``."""
    return _load(path).get("checkpoint")


def _load(path: str) -> Dict[str, Any]:
    torch = _torch()
    state = torch.load(path, map_location="cpu")
    if not isinstance(state, dict) or "step" not in state:
        raise InvalidArgument(f"{path}: not an ember.train checkpoint")
    return state


def report(metrics: Dict[str, Any], checkpoint: Any = None) -> None:
    """Records ``metrics`` (rank 0's: a JSON line, stdout or a progress line) and, given
    ``checkpoint`` (e.g. the model's and optimizer's state_dict), has rank 0 save it with
    every loader's state, atomically. Every rank calls it at the same points."""
    s = _current("report")
    s.step += 1
    if s.context.rank != 0:
        return
    now = time.monotonic()
    record = {"step": s.step, "time": round(time.time(), 3), **metrics,
              "data_stall_seconds": round(s.stall(), 3)}
    if s.gpu_meter is not None:
        record["gpu_idle_seconds"] = round(s.gpu_meter.seconds(wait=False), 3)
    path = None
    if checkpoint is not None and s.checkpoint_dir and (
            not s.checkpoint_every or s.step % s.checkpoint_every == 0):
        path = _save(s, checkpoint, metrics)
        record["checkpoint"] = path
    line = json.dumps(record, default=str)
    if s.metrics_path:
        with open(s.metrics_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    progress = (now, s.samples(), s.batches())
    _show(s, metrics, record, line, progress)
    s.last_report = progress
    if s.channel is not None:
        s.channel.send(("report", 0, record, path))


def _show(s: _Session, metrics: Dict[str, Any], record: Dict[str, Any], line: str,
          progress: Any) -> None:
    """`line` (the record as JSON) on stdout; on a terminal a progress line instead.
    `progress`: (time, samples of the job, batches of this worker) now."""
    if not sys.stdout.isatty():
        print(line, flush=True)
        return
    # A progress line, rewritten in place.
    (now, samples, batches), (then, samples_then, batches_then) = progress, s.last_report
    elapsed = max(now - then, 1e-9)
    rate = (samples - samples_then) / elapsed          # the job's samples a second
    batch_rate = (batches - batches_then) / elapsed    # this worker's batches a second
    per_epoch = 0
    for l in s.loaders.values():
        try:
            per_epoch += len(l)
        except Error:
            pass
    epoch = metrics.get("epoch")
    text = f"step {s.step}"
    if epoch is not None:
        text = f"epoch {epoch} " + text
    if per_epoch:
        text += f" ({batches % per_epoch or per_epoch}/{per_epoch} batches)"
    text += f"  {rate:,.0f} samples/s  data stall {record['data_stall_seconds']:.1f} s"
    epochs = s.config.get("epochs") if isinstance(s.config, dict) else None
    if per_epoch and epochs and batch_rate > 0:
        left = max(0, int(epochs) * per_epoch - batches)
        text += f"  ETA {left / batch_rate:,.0f} s"
    sys.stdout.write("\r" + text.ljust(79))
    sys.stdout.flush()
    s.progress_open = True


def _checkpoints(directory: str) -> List[str]:
    """The checkpoint files of `directory`, oldest first."""
    found = []
    for path in glob.glob(os.path.join(directory, "checkpoint-*.pt")):
        match = _CHECKPOINT_RE.match(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def latest_checkpoint(directory: Optional[str]) -> Optional[str]:
    """The newest checkpoint file in ``directory`` (``checkpoint-<step>.pt``), or None."""
    if not directory or not os.path.isdir(directory):
        return None
    found = _checkpoints(directory)
    return found[-1] if found else None


def _save(s: _Session, checkpoint: Any, metrics: Dict[str, Any]) -> str:
    torch = _torch()
    os.makedirs(s.checkpoint_dir, exist_ok=True)
    path = os.path.join(s.checkpoint_dir, f"checkpoint-{s.step:08d}.pt")
    temporary = f"{path}.tmp-{os.getpid()}"
    state = {"checkpoint": checkpoint, "step": s.step, "metrics": metrics,
             "loaders": {name: l.state_dict() for name, l in s.loaders.items()}}
    with open(temporary, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)  # whole or not there: a kill mid-write keeps the last one
    directory = os.open(s.checkpoint_dir, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    for old in _checkpoints(s.checkpoint_dir)[:-max(1, s.keep)]:
        os.remove(old)
    return path


def _worker(train_loop: Callable[[Dict[str, Any]], Any], settings: Dict[str, Any],
            env: Dict[str, str], channel: Any) -> None:
    """A worker process's body (multiprocessing spawn): the launcher's variables, the
    session, train_loop, and what happened, to run()'s process."""
    global _session
    os.environ.update(env)
    rank = int(env["EMBER_RANK"])
    try:
        _session = _Session(channel=channel, **settings)
        value = train_loop(settings["config"])
        s = _session
        stats = s.stats(rank)
        if s.progress_open:
            sys.stdout.write("\n")
        channel.send(("done", rank, value if rank == 0 else None, stats))
        _finish_process_group()
    except BaseException:  # noqa: BLE001 (the traceback goes to run(), whatever it is)
        channel.send(("failed", rank, traceback.format_exc(), None))
        sys.exit(1)


def _finish_process_group() -> None:
    if "torch.distributed" in sys.modules:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()


def _under_launcher() -> bool:
    return _ember.read_launch_env("")["launcher"] != "none"


def run(train_loop: Callable[[Dict[str, Any]], Any], *, workers: Optional[int] = None,
        config: Optional[Dict[str, Any]] = None, datasets: Optional[Dict[str, str]] = None,
        checkpoint_dir: Optional[str] = None, checkpoint_every: Optional[int] = None,
        keep_checkpoints: int = 3, max_failures: int = 0, backend: str = "gloo",
        seed: int = 0, job: Optional[str] = None, metrics_path: Optional[str] = None,
        timeout: Optional[float] = None, nodes: int = 1, node_rank: Optional[int] = None,
        coordinator: Optional[str] = None) -> Result:
    """Runs ``train_loop(config)`` on ``workers`` processes of this node (default: one per
    GPU with backend "nccl", else one per core, at most 8) and returns their ``Result``;
    under a launcher, in this process only. ``datasets`` maps the names
    ``loader`` takes to registered datasets or paths. ``timeout``: seconds the whole run
    may take (None: no limit) before its workers are stopped and TrainingFailed raised.
    ``nodes`` > 1: this node is ``node_rank`` of a run that every node starts with the same
    ``job`` and ``workers``, coordinated by the emberd at ``coordinator`` (HOST:PORT, default
    $EMBER_COORDINATOR), as ember-run --nnodes does."""
    config = dict(config or {})
    datasets = dict(datasets or {})
    if backend not in ("gloo", "nccl"):
        raise InvalidArgument(f"backend must be 'gloo' or 'nccl', not {backend!r}")
    if max_failures < 0:
        raise InvalidArgument(f"max_failures must be >= 0, not {max_failures}")
    if keep_checkpoints < 1:
        raise InvalidArgument(f"keep_checkpoints must be >= 1, not {keep_checkpoints}")
    if metrics_path is None and checkpoint_dir:
        metrics_path = os.path.join(checkpoint_dir, "metrics.jsonl")
    if checkpoint_dir:
        os.makedirs(checkpoint_dir, exist_ok=True)
    env = _ember.read_launch_env("")
    base_job = job or default_run(env)
    common = dict(config=config, datasets=datasets, seed=seed, checkpoint_dir=checkpoint_dir,
                  checkpoint_every=checkpoint_every, keep=keep_checkpoints,
                  metrics_path=metrics_path)
    if _under_launcher():
        return _run_here(train_loop, env, base_job, backend, common)
    if workers is None:
        workers = (_torch().cuda.device_count() if backend == "nccl" else 0) or \
            max(1, min(8, os.cpu_count() or 1))
    if workers < 1:
        raise InvalidArgument(f"workers must be >= 1, not {workers}")
    layout = _node_layout(nodes, node_rank, coordinator, job)

    result = Result()
    deadline = None if timeout is None else time.monotonic() + timeout
    context = multiprocessing.get_context("spawn")
    attempt = 0
    while True:
        resume = latest_checkpoint(checkpoint_dir)
        failure = _attempt(context, train_loop, workers, layout, attempt, base_job, backend,
                           resume, common, result, deadline)
        result.checkpoint = latest_checkpoint(checkpoint_dir)
        if failure is None:
            return result
        if result.restarts >= max_failures:
            raise TrainingFailed(
                f"ember.train: {failure[0]} (after {result.restarts} restart(s) of "
                f"max_failures={max_failures}):\n{failure[1]}", failure[1], result)
        result.restarts += 1
        attempt += 1
        print(f"ember.train: {failure[0]}; starting the {workers} workers again from "
              f"{result.checkpoint or 'the beginning'} (restart {result.restarts} of "
              f"{max_failures})", file=sys.stderr, flush=True)


@dataclasses.dataclass
class _NodeLayout:
    nodes: int = 1
    node_rank: int = 0
    coordinator: str = ""


def _node_layout(nodes: int, node_rank: Optional[int], coordinator: Optional[str],
                 job: Optional[str]) -> _NodeLayout:
    """run()'s node arguments checked as ember-run checks its flags."""
    if nodes < 1:
        raise InvalidArgument(f"nodes must be >= 1, not {nodes}")
    if nodes == 1:
        if node_rank not in (None, 0):
            raise InvalidArgument(f"node_rank {node_rank} is not in 0..0 (nodes=1)")
        return _NodeLayout(1, 0, coordinator or "")
    if node_rank is None or not 0 <= node_rank < nodes:
        raise InvalidArgument(f"node_rank {node_rank} is not in 0..{nodes - 1} "
                              f"(nodes={nodes}): each node's run() gives its own")
    if not job:
        raise InvalidArgument(f"job is required with nodes={nodes}: every node's run() must "
                              f"give its workers the same job")
    coordinator = coordinator or os.environ.get("EMBER_COORDINATOR", "")
    if not coordinator:
        raise InvalidArgument(f"coordinator (HOST:PORT of the emberd that coordinates the "
                              f"job) is required with nodes={nodes}, or $EMBER_COORDINATOR")
    host, _, port = coordinator.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgument(f"coordinator {coordinator!r} is not HOST:PORT")
    return _NodeLayout(nodes, node_rank, coordinator)


def _run_here(train_loop, env, base_job, backend, common) -> Result:
    """Under a launcher: this process is one rank; its restarts are the launcher's."""
    global _session
    rank = int(env["rank"])
    context = Context(rank, int(env["world_size"]), int(env["local_rank"]), base_job,
                      int(env.get("restart_count", 0) or 0), backend)
    _session = _Session(context=context, resume=latest_checkpoint(common["checkpoint_dir"]),
                        channel=None, **common)
    value = train_loop(common["config"])
    s = _session
    if s.progress_open:
        sys.stdout.write("\n")
    return Result(metrics={}, checkpoint=latest_checkpoint(common["checkpoint_dir"]),
                  value=value, workers=[s.stats(rank)])


def _attempt(context, train_loop, workers, layout, attempt, base_job, backend, resume, common,
             result, deadline):
    """Runs one attempt of this node's workers; None when all returned, else (what failed,
    its traceback). Stops the others when one fails."""
    job = f"{base_job}.attempt{attempt}" if attempt else base_job
    world_size = workers * layout.nodes
    # A pipe per worker (not a multiprocessing.Queue: no named semaphores in /dev/shm).
    processes, pipes = [], []
    ranks = [layout.node_rank * workers + local for local in range(workers)]
    for local, rank in enumerate(ranks):
        env = {"EMBER_RANK": str(rank), "EMBER_WORLD_SIZE": str(world_size),
               "EMBER_LOCAL_RANK": str(local), "EMBER_LOCAL_WORLD_SIZE": str(workers),
               "EMBER_NODE_RANK": str(layout.node_rank), "EMBER_NNODES": str(layout.nodes),
               "EMBER_JOB": job, "EMBER_RESTART_COUNT": str(attempt)}
        if layout.coordinator:
            env["EMBER_COORDINATOR"] = layout.coordinator
        settings = dict(common, context=Context(rank, world_size, local, job, attempt, backend),
                        resume=resume)
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=_worker, name=f"ember.train rank {rank}",
                                  args=(train_loop, settings, env, sender))
        process.start()
        sender.close()  # the worker's end: the pipe ends when the worker does
        processes.append(process)
        pipes.append(receiver)
    pending = []

    def receive(timeout):
        """The next message of any worker, or None within `timeout`."""
        if not pending:
            for pipe in multiprocessing.connection.wait(pipes, timeout):
                try:
                    pending.append(pipe.recv())
                except (EOFError, OSError):
                    pipes.remove(pipe)  # the worker ended; its exit code says how
                    pipe.close()
        return pending.pop(0) if pending else None

    done: Dict[int, WorkerStats] = {}
    failure = None
    try:
        while len(done) < workers and failure is None:
            message = receive(0.2)
            kind, rank, payload, extra = message if message else (None, None, None, None)
            if kind == "report":
                result.metrics = payload
            elif kind == "done":
                done[rank] = extra
                if rank == 0:
                    result.value = payload
            elif kind == "failed":
                failure = (f"worker {rank} raised", payload)
                # Another worker's death makes the others' collectives raise: name it first.
                time.sleep(0.2)
                for other, process in zip(ranks, processes):
                    if other not in done and other != rank and process.exitcode is not None \
                            and process.exitcode < 0:
                        died = f"worker {other} exited with {_describe_exit(process.exitcode)}"
                        failure = (died, f"{died}; then worker {rank} raised:\n{payload}")
                        break
            if failure is None and kind is None:
                for rank, process in zip(ranks, processes):
                    if rank not in done and process.exitcode is not None:
                        # Dead without a word (a signal, os._exit): after its last message.
                        failure = (f"worker {rank} exited with "
                                   f"{_describe_exit(process.exitcode)}",
                                   f"worker {rank} exited with "
                                   f"{_describe_exit(process.exitcode)}")
                        break
            if failure is None and deadline is not None and time.monotonic() > deadline:
                failure = ("the run's timeout passed", "the run's timeout passed")
    finally:
        _stop(processes)
        for pipe in pipes:
            pipe.close()
    result.workers = [done[r] for r in sorted(done)]
    return failure


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"status {code}"


def _stop(processes) -> None:
    """Ends every worker still running: SIGTERM, then SIGKILL after a grace period."""
    for process in processes:
        if process.exitcode is None:
            process.terminate()
    deadline = time.monotonic() + _STOP_GRACE_SECONDS
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.exitcode is None:
            process.kill()
            process.join()


__all__ = ["Context", "Result", "TrainingFailed", "WorkerStats", "get_checkpoint",
           "get_context", "latest_checkpoint", "load_checkpoint", "loader", "prepare",
           "report", "run"]
