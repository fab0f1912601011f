"""What bench/compare runs, and what its runs share (Context: options, builds, a temporary
directory, private emberds, the results heading).

The comparison suite's scenarios (training, images, scaling, datasets, images-training:
SUITE; each in scenarios/<name with _ for ->.py) each have
    NAME, TITLE: its --scenario name and the heading of its results,
    prepare(ctx): builds or generates what its runs need (once per invocation),
    runs(ctx): the list of Run(system, case, fn), one round of the scenario; bench/compare
        runs the list --repeat times, rotating its order each round (interleaved),
    report(records): markdown (tables, ratios, targets) from all rounds' records,
    plot(records, path): a PNG at path.
fn(ctx) returns a record: a dict of figures (wall_s, peak_pss_mib, cpu_s, ...).

The other benchmarks (BENCHES: `bench/compare <name> [options]`) each have
    NAME, and a docstring whose first paragraph is its help,
    add_arguments(parser): its options,
    main(ctx, args): runs it, appends to its files in ctx.results; returns the exit status.
Every figure of memory or CPU comes from bench/measure.py."""

import collections
import dataclasses
import datetime
import functools
import os
import re
import shutil
import json
import statistics
import subprocess
import tempfile
from typing import Callable

from emberd import Emberd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FMNIST = "/usr/share/datasets/fashion-mnist"
PIPELINE = "configs/pipelines/imagenet_train.yaml"
EMBER_RUN = "bazel-bin/tools/ember_run/ember-run"
TRAINER = "bazel-bin/sdk/examples/fashion_mnist_train"
LOADER_BENCH = "bazel-bin/bench/loader_bench"
DAEMON_BUILD = ["//daemon:emberd", "//tools/emberctl:emberctl"]
SUITE = ("training", "images", "scaling", "datasets", "images-training")
BENCHES = ("loader_bench", "image_bench", "train_bench", "resume_accuracy", "sync_bench",
           "nodes_bench", "coordinator_scale", "soak", "python_loaders", "footprint",
           "python_handoff", "webdataset_bench", "shard_cache_bench", "remote_bench", "nodes_cache_bench",
           "share_bench", "workers_bench")


class RunFailed(RuntimeError):
    pass


class Context:
    """What the scenarios share: options, builds, a temporary directory, the venv."""

    def __init__(self, args, results):
        self.args = args
        self.epochs = getattr(args, "epochs", None)
        self.seconds = getattr(args, "seconds", None)
        self.results = results  # where the results files go (bench/results)
        self.round = 1  # the round being run (run_scenario sets it)
        self.root = tempfile.mkdtemp(prefix="ember-compare-", dir="/tmp")
        self.cache = os.path.expanduser(os.environ.get("EMBER_BENCH_CACHE",
                                                       "~/.cache/ember/bench-data"))
        os.makedirs(self.cache, exist_ok=True)
        self._built = set()
        self._python_ember = None
        self._venv = None
        self._count = 0

    def log(self, message):
        print(f"compare: {message}", flush=True)

    def build(self, targets):
        missing = [t for t in targets if t not in self._built]
        if missing:
            self.log(f"bazel build {' '.join(missing)}")
            subprocess.run(["bazel", "build", *missing], check=True, cwd=ROOT,
                           stdout=subprocess.DEVNULL)
            self._built.update(missing)

    def tmpdir(self, name):
        self._count += 1
        path = os.path.join(self.root, f"{self._count:03d}-{name}")
        os.makedirs(path)
        return path

    def python_ember(self):
        """A PYTHONPATH entry holding the built `ember` package."""
        if self._python_ember is None:
            self.build(["//sdk/python:ember"])
            target = os.path.join(self.root, "python", "ember")
            os.makedirs(target)
            package = os.path.join(ROOT, "sdk", "python", "ember")
            for name in os.listdir(package):
                if name.endswith(".py"):
                    shutil.copy(os.path.join(package, name), target)
            shutil.copy(os.path.join(ROOT, "bazel-bin", "sdk", "python", "ember", "_ember.so"),
                        target)
            self._python_ember = os.path.dirname(target)
        return self._python_ember

    def venv_python(self):
        """The baselines' interpreter (installs them on first use)."""
        if self._venv is None:
            done = subprocess.run([os.path.join(ROOT, "bench", "setup-baselines")], cwd=ROOT,
                                  stdout=subprocess.PIPE, text=True)
            if done.returncode != 0:
                raise RunFailed("bench/setup-baselines failed (its output is above)")
            self._venv = done.stdout.strip().splitlines()[-1]
        return self._venv

    def fmnist_daemon(self, name, splits=("train", "test")):
        """A private emberd with Fashion-MNIST's splits registered as fmnist-<split>."""
        daemon = Emberd(self.tmpdir(name))
        for split in splits:
            daemon.ctl("dataset", "add", f"fmnist-{split}", "--format", "idx", "--path", FMNIST,
                       "--split", split)
        return daemon

    def append(self, name, text, show=True):
        """Appends text to ctx.results/name (and shows it)."""
        os.makedirs(self.results, exist_ok=True)
        with open(os.path.join(self.results, name), "a", encoding="utf-8") as f:
            f.write(text)
        if show:
            print(text, end="", flush=True)

    def fail(self, system, output):
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise RunFailed(f"{system}: the run failed; the end of its output:\n{tail}")

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)


def machine():
    with open("/proc/meminfo", encoding="ascii") as f:
        mem_kib = int(f.readline().split()[1])
    model = ""
    with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} cores ({model}), {mem_kib / 1048576:.0f} GiB"


def heading(command, note="", title=""):
    """The start of a run's section in a bench/results/*.md file: the UTC time, the machine
    (and `title`) and the command line (and `note`)."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    return f"\n## {now} — {machine()}{title}\n\n`{command}`{note}\n\n"


@functools.lru_cache(maxsize=None)
def torch_version():
    """The version of Debian's torch, which every Python run uses."""
    done = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True)
    return done.stdout.strip() or "?"


def load1():
    return os.getloadavg()[0]


def loadavg():
    """The 1-, 5- and 15-minute load averages, as text."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def commit(paths=(".", ":(exclude)bench/results")):
    """HEAD's short hash, with " (with changes)" if `paths` differ from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=ROOT).stdout.strip() or "?"
    clean = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", *paths], cwd=ROOT)
    return head + ("" if clean.returncode == 0 else " (with changes)")


def value(output, name):
    """The last NAME=<number> in output, as a float; None if there is none."""
    found = re.findall(rf"{re.escape(name)}=([0-9.eE+-]+)", output)
    return float(found[-1]) if found else None


@dataclasses.dataclass
class Run:
    system: str
    case: str
    fn: Callable


def by_key(records):
    """(case, system) -> {round: record}."""
    out = collections.defaultdict(dict)
    for r in records:
        out[r["case"], r["system"]][r["round"]] = r
    return out


def append_record(records, jsonl, record, **fields):
    """Adds `fields` and the time (UTC) to `record`, keeps it in `records` and appends it
    to the JSON-lines file `jsonl`."""
    record.update(fields)
    record["time"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    records.append(record)
    with open(jsonl, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def spread(values, fmt="{:,.0f}"):
    """'median (min-max)' of the values that are not None ('' if none)."""
    values = [v for v in values if v is not None]
    if not values:
        return ""
    m = statistics.median(values)
    if len(values) == 1:
        return fmt.format(m)
    return f"{fmt.format(m)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def median_spread(rounds, key, fmt="{:.1f}"):
    """'median (min-max)' of key over the rounds' records that have it."""
    return spread([r.get(key) for r in rounds.values()], fmt)


def median(rounds, key):
    values = [r[key] for r in rounds.values() if r.get(key) is not None]
    return statistics.median(values) if values else None


def ratio(a_rounds, b_rounds, key):
    """The median over rounds of a's figure / b's in the same round (side by side)."""
    values = [a_rounds[k][key] / b_rounds[k][key] for k in a_rounds
              if k in b_rounds and a_rounds[k].get(key) and b_rounds[k].get(key)]
    return statistics.median(values) if values else None


def fmt_ratio(value, target=None):
    if value is None:
        return ""
    text = f"{value:.2f}x"
    if target is not None:
        text += " (met)" if value <= target else f" (**missed**, target {target:.2f}x)"
    return text


def figure(columns, size):
    """A row of `columns` plots (matplotlib, no display): (fig, axes)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt.subplots(1, columns, figsize=size)


def save_figure(fig, title, path):
    import matplotlib.pyplot as plt
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
