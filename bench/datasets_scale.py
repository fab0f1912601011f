#!/usr/bin/python3
"""How Ember's cost grows with a dataset's size: packed and token datasets of 10k, 100k
and 1M samples, each on a fresh private emberd.

Per (format, N) it measures
  - register_s: the wall time of `emberctl dataset add` (ctl_s: that of `emberctl status`,
    the same process start and connection with no work, for comparison);
  - emberd's RSS and PSS with their anonymous and file-backed parts (smaps_rollup): at
    start, after registration, at the first batch (the dataset loaded and epoch 0's order
    built; sampled as the stream runs on), after epochs 0 and 1, at the end of the
    --seconds window and at the end;
  - first_batch_s: from OpenStream to the first batch in a bench/loader_bench reader (1
    rank, batch 64), open_stream_s the OpenStream call alone;
  - epoch_s: the two whole epochs that reader reads;
  - samples_per_s and ns_per_sample: loader_bench's rate over --seconds after 1 s of
    warm-up (1 rank, batch 64, --touch unless --no-touch), and the daemon's CPU time per
    sample over exactly that window (daemon_cpu_ns_per_sample);
  - the file-system syscalls emberd makes (`perf record` of the syscalls:sys_enter_*
    tracepoints of TRACED: open*, stat*, access*, readlink*, getdents*; in the kernel,
    no ptrace, so no cost to the daemon) during `emberctl status` (a positive control:
    emberd lists /proc/self/fd for it), registration, the whole two-epoch stream, and
    the second epoch: the last must be 0, or at least not grow with N (no directory walk
    per epoch);
  - the dataset on disk (data and index bytes) and the catalog entry's size.

Datasets are generated once into the cache directory (--keep) and reused:
  packed-N/  `emberctl pack --align 64` of an image folder of N 32x32 RGB JPEGs (quality 90,
             ~1 KB): Fashion-MNIST's 60,000 training images (Debian's
             dataset-fashion-mnist), upscaled and tinted per class, image i being
             training image i mod 60,000. The folder is written, packed, then removed;
             the times of both steps are in the record (gen). Pipeline: resize to
             [32, 32], uint8 CHW.
  tokens-N-L512.bin  (N + 1) * 512 uint16 tokens (numpy's PCG64, seed 0, ids < 50257):
             N windows of seq_len 512 (1M: 1.03 GB). vocab_size is not given, so the
             load does not scan the file.

  bench/datasets_scale.py [--sizes 10000,100000,1000000] [--formats packed,tokens]
      [--seconds 5] [--keep DIR] [--json FILE] [--no-touch] [--no-trace]

Prints one `result: {json}` line per (format, N), then a markdown table; --json FILE
appends the records with bench/json_lines.py's head. Run from the repository root after
`bazel build //daemon:emberd //tools/emberctl //bench:loader_bench`.
"""

import argparse
import gzip
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

import measure  # bench/measure.py


EMBERD = "bazel-bin/daemon/emberd"
EMBERCTL = "bazel-bin/tools/emberctl/emberctl"
LOADER_BENCH = "bazel-bin/bench/loader_bench"
FMNIST = "/usr/share/datasets/fashion-mnist"
CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker",
           "bag", "ankle-boot"]
SEQ_LEN = 512
VOCAB = 50257
BATCH = 64
PACKED_PIPELINE = "steps:\n  - resize: {size: [32, 32]}\noutput: {dtype: uint8, layout: CHW}\n"
TOKENS_PIPELINE = f"tokens:\n  seq_len: {SEQ_LEN}\n  dtype: uint16\n"
# The syscalls that find or open files by path, and read directories.
TRACED = ("open", "openat", "openat2", "getdents", "getdents64", "newstat", "newlstat",
          "newfstatat", "statx", "access", "faccessat", "faccessat2", "readlink", "readlinkat")
MIB = 1 << 20


def log(message):
    print(f"datasets_scale: {message}", file=sys.stderr, flush=True)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    _, _, ndim = struct.unpack(">HBB", data[:4])
    shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    return data[4 + 4 * ndim:], shape


# ---------------------------------------------------------------------------------------
# Generation (once per cache directory)


def jpeg_pool():
    """The 60,000 Fashion-MNIST training images as (label, 32x32 RGB JPEG bytes)."""
    import numpy as np
    from PIL import Image

    pixels, shape = read_idx(f"{FMNIST}/train-images-idx3-ubyte.gz")
    labels, _ = read_idx(f"{FMNIST}/train-labels-idx1-ubyte.gz")
    images = np.frombuffer(pixels, dtype=np.uint8).reshape(shape)
    tints = np.array([[255, 255, 255], [255, 200, 160], [160, 200, 255], [255, 160, 200],
                      [200, 255, 160], [160, 255, 255], [255, 255, 160], [200, 160, 255],
                      [220, 220, 160], [160, 220, 220]], dtype=np.float32) / 255
    pool = []
    for image, label in zip(images, labels):
        big = np.asarray(Image.fromarray(image).resize((32, 32), Image.BICUBIC), np.float32)
        rgb = (big[:, :, None] * tints[label]).clip(0, 255).astype(np.uint8)
        out = io.BytesIO()
        Image.fromarray(rgb, "RGB").save(out, "JPEG", quality=90)
        pool.append((int(label), out.getvalue()))
    return pool


def make_packed(cache, n, pool_box):
    """cache/packed-N (made if missing); returns its generation record."""
    out = os.path.join(cache, f"packed-{n}")
    meta = out + ".gen.json"
    if os.path.exists(os.path.join(out, "manifest")) and os.path.exists(meta):
        with open(meta) as f:
            return json.load(f)
    if not pool_box:
        start = time.monotonic()
        pool_box.append(jpeg_pool())
        log(f"encoded {len(pool_box[0])} JPEGs in {time.monotonic() - start:.1f} s")
    pool = pool_box[0]
    src = out + ".src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    start = time.monotonic()
    for name in CLASSES:
        os.makedirs(os.path.join(src, name))
    for i in range(n):
        label, data = pool[i % len(pool)]
        with open(os.path.join(src, CLASSES[label], f"{i:07d}.jpg"), "wb") as f:
            f.write(data)
    write_s = time.monotonic() - start
    start = time.monotonic()
    subprocess.run([EMBERCTL, "pack", src, out, "--align", "64", "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    pack_s = time.monotonic() - start
    start = time.monotonic()
    subprocess.run(["rm", "-rf", "--", src], check=True)
    remove_s = time.monotonic() - start
    gen = {"write_files_s": round(write_s, 2), "pack_s": round(pack_s, 2),
           "remove_files_s": round(remove_s, 2)}
    log(f"packed-{n}: wrote {n} files in {write_s:.1f} s, packed in {pack_s:.1f} s, "
        f"removed the files in {remove_s:.1f} s")
    with open(meta, "w") as f:
        json.dump(gen, f)
    return gen


def make_tokens(cache, n):
    """cache/tokens-N-L512.bin (made if missing); returns its generation record."""
    import numpy as np

    path = os.path.join(cache, f"tokens-{n}-L{SEQ_LEN}.bin")
    meta = path + ".gen.json"
    if os.path.exists(path) and os.path.exists(meta):
        with open(meta) as f:
            return json.load(f)
    start = time.monotonic()
    total = (n + 1) * SEQ_LEN
    rng = np.random.Generator(np.random.PCG64(0))
    chunk = 1 << 24
    with open(path + ".tmp", "wb") as f:
        for at in range(0, total, chunk):
            rng.integers(0, VOCAB, size=min(chunk, total - at), dtype=np.uint16).tofile(f)
    os.rename(path + ".tmp", path)
    gen = {"write_s": round(time.monotonic() - start, 2)}
    log(f"tokens-{n}: {total} tokens in {gen['write_s']:.1f} s")
    with open(meta, "w") as f:
        json.dump(gen, f)
    return gen


def packed_sizes(path):
    """(record bytes, index bytes, file bytes) of a packed dataset: the shard headers'
    index sizes (pack/format.h) and the files' sizes."""
    index = files = 0
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        files += os.path.getsize(full)
        if name.startswith("shard-"):
            with open(full, "rb") as f:
                header = f.read(64)
            index += struct.unpack_from("<Q", header, 32)[0]
    return files - index, index, files


# ---------------------------------------------------------------------------------------
# The daemon and its process


def proc_memory(pid):
    """emberd's memory in MiB from /proc/PID/smaps_rollup (exact: /proc/PID/status's VmRSS
    lags behind with per-thread counters): rss, rss_anon (its anonymous pages), pss and its
    pss_anon, pss_file (mapped files: libraries, shards, token files), pss_shmem (rings)."""
    keys = {"Rss": "rss", "Anonymous": "rss_anon", "Pss": "pss", "Pss_Anon": "pss_anon",
            "Pss_File": "pss_file", "Pss_Shmem": "pss_shmem"}
    values = measure.rollup(pid, keys) or {}
    return {keys[k]: round(v, 1) for k, v in values.items()}


class Daemon:
    """A private emberd (socket and state in a temporary directory, as tools/lib/emberd.sh's
    emberd_start), and, if `trace`, `perf record` of its file-system syscalls (TRACED)
    from just after it answers."""

    def __init__(self, trace):
        self.dir = tempfile.mkdtemp(prefix="ember-ds.")
        self.socket = os.path.join(self.dir, "emberd.sock")
        command = [EMBERD, "--socket", self.socket, "--state-dir",
                   os.path.join(self.dir, "state"), "--log-level", "warn"]
        env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
        self.log = open(os.path.join(self.dir, "emberd.log"), "wb")
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        self.pid = self.proc.pid
        self.perf = None
        deadline = time.monotonic() + 30
        while subprocess.run(self.ctl("status"), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"emberd did not start; see {self.dir}/emberd.log")
            time.sleep(0.1)
        if trace:
            self.perf_data = os.path.join(self.dir, "syscalls.perf")
            events = [a for e in TRACED for a in ("-e", f"syscalls:sys_enter_{e}")]
            self.perf = subprocess.Popen(
                ["perf", "record", "-q", "-k", "monotonic", *events, "-p", str(self.pid),
                 "-o", self.perf_data], stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(self.dir, "perf.log"), "wb"))
            time.sleep(1)  # perf attaches to every thread
            if self.perf.poll() is not None:
                raise RuntimeError(f"perf record failed: see {self.dir}/perf.log")

    def ctl(self, *args):
        return [EMBERCTL, "--socket", self.socket, *args]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.perf is not None and self.perf.poll() is None:
            self.perf.send_signal(2)  # it also ends on its own when emberd has exited
        if self.perf is not None:
            self.perf.wait(timeout=60)
        self.log.close()

    def syscalls(self, windows):
        """After stop(): {window name: {syscall: count}} of the traced syscalls emberd made
        in each window of `windows` ({name: (from, to)}, unix seconds); None without trace."""
        if self.perf is None:
            return None
        # perf's clock is CLOCK_MONOTONIC (-k monotonic); the windows are wall-clock times.
        offset = time.time() - time.monotonic()
        script = subprocess.run(["perf", "script", "-i", self.perf_data, "-F", "time,event"],
                                capture_output=True, text=True, check=True).stdout
        counts = {name: {} for name in windows}
        for line in script.splitlines():
            m = re.match(r"\s*([\d.]+):\s+syscalls:sys_enter_(\w+):", line)
            if not m:
                continue
            at = float(m.group(1)) + offset
            for name, (since, until) in windows.items():
                if since <= at <= until:
                    counts[name][m.group(2)] = counts[name].get(m.group(2), 0) + 1
        return counts

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def run_bench(daemon, name, mode, touch, events, timeout):
    """Runs loader_bench (1 reader, batch 64) on `name` with `mode` (its --epochs or
    --seconds flags), sampling emberd's memory and CPU time at each line it prints as it
    happens: events["first_batch" | "epoch0" | "epoch1" | "measuring" | "measured"] =
    {"memory", "cpu_s"}. Returns {"first_batch": (seconds
    from OpenStream, seconds in OpenStream), "epochs": [{"samples", "s", "unix": (from,
    to)}], "measured": samples, "samples_per_s"}."""
    command = [LOADER_BENCH, "--socket", daemon.socket, name, "--ranks", "1", "--batch-size",
               str(BATCH), *mode] + (["--touch"] if touch else [])
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    patterns = {
        "first_batch": r"reader 0: first batch ([\d.]+) s after OpenStream \(connect [\d.]+ s, "
                       r"OpenStream ([\d.]+) s\)",
        "epoch": r"reader 0: epoch (\d+): (\d+) samples in ([\d.]+) s .* unix ([\d.]+)\.\.([\d.]+)",
        "measuring": r"reader 0: measuring from",
        "measured": r"reader 0: measured (\d+) samples",
        "rate": r"bench: samples_per_s=([\d.]+)",
    }
    out = {"epochs": []}
    watchdog = threading.Timer(timeout, os.killpg, (proc.pid, 9))
    watchdog.start()
    for line in proc.stdout:
        for kind, pattern in patterns.items():
            m = re.match(pattern, line)
            if not m:
                continue
            if kind != "rate":
                event = "epoch" + m.group(1) if kind == "epoch" else kind
                events[event] = {"memory": proc_memory(daemon.pid),
                                 "cpu_s": measure.cpu_seconds(daemon.pid)}
            if kind == "first_batch":
                out["first_batch"] = (float(m.group(1)), float(m.group(2)))
            elif kind == "epoch":
                out["epochs"].append({"samples": int(m.group(2)), "s": float(m.group(3)),
                                      "unix": (float(m.group(4)), float(m.group(5)))})
            elif kind == "measured":
                out["measured"] = int(m.group(1))
            elif kind == "rate":
                out["samples_per_s"] = float(m.group(1))
    err = proc.stderr.read()
    watchdog.cancel()
    if proc.wait() != 0 or "first_batch" not in out:
        raise RuntimeError(f"{' '.join(command)} failed: {err.strip()}")
    return out


def timed(command):
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
    return time.monotonic() - start, done.stdout


# ---------------------------------------------------------------------------------------
# One (format, N)


def measure_one(args, fmt, n, path, pipeline_file, gen, data_bytes, index_bytes):
    daemon = Daemon(trace=not args.no_trace)
    try:
        record = {"scenario": "datasets", "format": fmt, "samples": n, "batch": BATCH,
                  "ranks": 1, "touch": not args.no_touch, "gen": gen,
                  "data_mib": round(data_bytes / MIB, 2),
                  "index_mib": round(index_bytes / MIB, 3)}
        if fmt == "tokens":
            record["seq_len"] = SEQ_LEN
        memory = {"start": proc_memory(daemon.pid)}
        status_from = time.time()
        record["ctl_s"] = round(min(timed(daemon.ctl("status"))[0] for _ in range(3)), 4)
        status_until = time.time()
        name = f"{fmt}-{n}"
        reg_from = time.time()
        record["register_s"] = round(timed(daemon.ctl(
            "dataset", "add", name, "--format", fmt, "--path", path,
            "--pipeline", pipeline_file))[0], 4)
        reg_until = time.time()
        memory["registered"] = proc_memory(daemon.pid)
        catalog = os.path.join(daemon.dir, "state", "catalog.yaml")
        record["catalog_bytes"] = os.path.getsize(catalog) if os.path.exists(catalog) else None
        _, inspect = timed(daemon.ctl("dataset", "inspect", name))
        m = re.search(r" (\d+) samples ", inspect)
        if not m or int(m.group(1)) != n:
            raise RuntimeError(f"{name}: emberctl dataset inspect says {inspect!r}, expected "
                               f"{n} samples")

        # Two whole epochs: first batch, memory at each event, the second epoch's syscalls.
        events = {}
        stream_from = time.time()
        out = run_bench(daemon, name, ["--epochs", "2"], not args.no_touch, events,
                        timeout=3600)
        stream_until = time.time()
        record["first_batch_s"], record["open_stream_s"] = out["first_batch"]
        memory.update({k: v["memory"] for k, v in events.items()})
        spans = out["epochs"]
        record["epoch_s"] = [round(e["s"], 3) for e in spans]
        record["epoch_samples"] = [e["samples"] for e in spans]

        # Per-sample cost over --seconds (after loader_bench's 1 s of warm-up); the
        # daemon's CPU time over exactly the measured window.
        events = {}
        out = run_bench(daemon, name, ["--seconds", str(args.seconds)], not args.no_touch,
                        events, timeout=args.seconds + 120)
        window = out["measured"]
        record["samples_per_s"] = out["samples_per_s"]
        record["ns_per_sample"] = round(1e9 / record["samples_per_s"], 1)
        record["daemon_cpu_ns_per_sample"] = round(
            (events["measured"]["cpu_s"] - events["measuring"]["cpu_s"]) * 1e9 / window, 1)
        memory["steady"] = events["measured"]["memory"]
        memory["end"] = proc_memory(daemon.pid)
        record["emberd_mib"] = memory
        daemon.stop()

        syscalls = daemon.syscalls({
            "status": (status_from, status_until), "register": (reg_from, reg_until),
            "stream": (stream_from, stream_until), "epoch1": spans[1]["unix"]})
        if syscalls is not None:
            if not syscalls["status"]:
                raise RuntimeError("perf saw no syscalls of emberd's `status` replies (it "
                                   "lists /proc/self/fd): the trace does not work")
            for window, counts in syscalls.items():
                record[f"syscalls_{window}"] = counts
            record["syscalls_epoch1_total"] = sum(syscalls["epoch1"].values())
        return record
    finally:
        daemon.stop()
        if args.keep_daemon_dirs:
            log(f"kept {daemon.dir}")
        else:
            daemon.remove()


def table(records):
    """The markdown table of the records: emberd's memory at start, after registration,
    at the first batch and at the end of epoch 0 (RSS, its anonymous part, PSS)."""
    rows = ["| format | N | data MiB | index MiB | register s | emberd RSS MiB: start / "
            "registered / 1st batch / epoch 0 | of it anon | PSS | first batch s | "
            "epoch 0, 1 s | samples/s | ns/sample | daemon CPU ns/sample | fs syscalls in "
            "epoch 1 |",
            "|---|---:|---:|---:|---:|---|---|---|---:|---|---:|---:|---:|---:|"]
    points = ("start", "registered", "first_batch", "epoch0")
    for r in records:
        m = r["emberd_mib"]
        rss, anon, pss = (" / ".join(f"{m[p][k]:.0f}" for p in points)
                          for k in ("rss", "rss_anon", "pss"))
        sys_epoch = r.get("syscalls_epoch1_total")
        rows.append(
            f"| {r['format']} | {r['samples']:,} | {r['data_mib']:.0f} | {r['index_mib']:.2f} | "
            f"{r['register_s']:.3f} | {rss} | {anon} | {pss} | {r['first_batch_s']:.3f} | "
            f"{r['epoch_s'][0]:.2f}, {r['epoch_s'][1]:.2f} | {r['samples_per_s']:,.0f} | "
            f"{r['ns_per_sample']:,.0f} | {r['daemon_cpu_ns_per_sample']:,.0f} | "
            f"{'-' if sys_epoch is None else sys_epoch} |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--formats", default="packed,tokens")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--keep", default=os.path.expanduser("~/.cache/ember/bench-data/datasets"),
                        help="cache directory of the generated datasets (reused)")
    parser.add_argument("--json", help="append the records to this file (JSON lines)")
    parser.add_argument("--no-touch", action="store_true",
                        help="the readers do not read the batches' bytes")
    parser.add_argument("--no-trace", action="store_true",
                        help="no perf record of emberd's syscalls (no syscall counts)")
    parser.add_argument("--keep-daemon-dirs", action="store_true",
                        help="keep each daemon's directory (its log, perf data)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    formats = [f for f in args.formats.split(",") if f]
    for f in formats:
        if f not in ("packed", "tokens"):
            parser.error(f"unknown format '{f}' (packed, tokens)")
    for tool in (EMBERD, EMBERCTL, LOADER_BENCH):
        if not os.access(tool, os.X_OK):
            parser.error(f"{tool} is missing: bazel build //daemon:emberd //tools/emberctl "
                         "//bench:loader_bench (from the repository root)")
    if not args.no_trace and shutil.which("perf") is None:
        parser.error("perf is missing (apt-get install linux-perf), or pass --no-trace")
    os.makedirs(args.keep, exist_ok=True)
    pipelines = {}
    for fmt, text in (("packed", PACKED_PIPELINE), ("tokens", TOKENS_PIPELINE)):
        pipelines[fmt] = os.path.join(args.keep, f"{fmt}.yaml")
        with open(pipelines[fmt], "w") as f:
            f.write(text)

    records, pool_box = [], []
    for fmt in formats:
        for n in sizes:
            if fmt == "packed":
                gen = make_packed(args.keep, n, pool_box)
                path = os.path.join(args.keep, f"packed-{n}")
                data_bytes, index_bytes, _ = packed_sizes(path)
            else:
                gen = make_tokens(args.keep, n)
                path = os.path.join(args.keep, f"tokens-{n}-L{SEQ_LEN}.bin")
                data_bytes, index_bytes = os.path.getsize(path), 0
            load_before = os.getloadavg()[0]
            log(f"{fmt} N={n}: measuring")
            record = measure_one(args, fmt, n, path, pipelines[fmt], gen, data_bytes,
                                 index_bytes)
            print("result: " + json.dumps(record), flush=True)
            if args.json:
                import json_lines
                json_lines.append(args.json, "datasets_scale", load_before, record)
            records.append(record)
    print()
    print(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
