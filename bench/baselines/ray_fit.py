"""One Ray Train run of a baseline, as bench/baselines/ray_train_fmnist.py and
ray_images_train.py both make it: a local Ray instance in a per-run temp dir, a
TorchTrainer of CPU workers, rank 0's metrics read back from a JSON file it writes.

  metrics, fit_s = ray_fit.fit(name, train_loop, config, make_datasets, ranks=2, cpus=2,
                               temp_dir=T, import_dirs=[...], timeout=None)

- ray.init(num_cpus=cpus, _temp_dir=temp_dir, include_dashboard=False): every Ray process
  names the per-run directory in its command line (bench/measure.py --match), runs leave
  nothing shared behind, and there is no web UI (no part of training). num_cpus is Ray's
  logical CPU budget: the callers say how they share it.
- config gets "result_file": rank 0's train_loop writes its metrics there as JSON.
- make_datasets() (called after ray.init, as Ray Datasets need it) gives TorchTrainer's
  datasets; ScalingConfig(num_workers=ranks, use_gpu=False); RunConfig(name,
  storage_path=<temp_dir>/results) instead of ~/ray_results.
- import_dirs go first on PYTHONPATH, which the workers inherit through the raylet: they
  import the baselines' modules by name.
- timeout (seconds, None: none) bounds the whole fit (TorchTrainer.fit() has none).
Raises RayRunFailed naming what failed: the timeout, the training's error, a missing or
unreadable result.
"""

import json
import math
import os
import signal
import time

import ray
import ray.train
import ray.train.torch


class RayRunFailed(RuntimeError):
    pass


def fit(name, train_loop, config, make_datasets, *, ranks, cpus, temp_dir, import_dirs,
        timeout=None):
    """(rank 0's metrics, seconds of TorchTrainer.fit())."""
    temp_dir = os.path.abspath(temp_dir)
    os.makedirs(temp_dir, exist_ok=True)
    result_file = os.path.join(temp_dir, "rank0_result.json")
    if os.path.exists(result_file):
        os.remove(result_file)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        list(import_dirs) + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

    timed_out = []

    def on_timeout(_signum, _frame):
        timed_out.append(True)
        raise TimeoutError(f"no result after {timeout:g} s")

    if timeout is not None:
        signal.signal(signal.SIGALRM, on_timeout)
        signal.alarm(math.ceil(timeout))
    try:
        ray.init(num_cpus=cpus, _temp_dir=temp_dir, include_dashboard=False)
        trainer = ray.train.torch.TorchTrainer(
            train_loop, train_loop_config={**config, "result_file": result_file},
            scaling_config=ray.train.ScalingConfig(num_workers=ranks, use_gpu=False),
            datasets=make_datasets(),
            run_config=ray.train.RunConfig(name=name,
                                           storage_path=os.path.join(temp_dir, "results")))
        fit_start = time.perf_counter()
        result = trainer.fit()
        fit_s = time.perf_counter() - fit_start
    except Exception:  # noqa: BLE001  ray.get() wraps the alarm's TimeoutError
        if not timed_out:
            raise
        raise RayRunFailed(f"no result after --timeout {timeout:g} s") from None
    finally:
        signal.alarm(0)
        ray.shutdown()
    if result.error:
        raise RayRunFailed(f"training failed: {result.error}")
    try:
        with open(result_file) as f:
            return json.load(f), fit_s
    except (OSError, ValueError) as e:
        raise RayRunFailed(f"rank 0 left no result in {result_file}: {e}") from None
