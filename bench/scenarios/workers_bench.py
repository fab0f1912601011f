"""Remote decode workers: what a second node's core adds to a decode-bound trainer node. Two
emberd daemons as two nodes in two network namespaces joined by a veth pair (mutual TLS,
certificates from one CA), each pinned to one core (`taskset`): node A, the trainer's, on
core 0 with its reader, and node B, the worker (`lend_decode: true`), on core 1; both with
`decode_threads: 1`. Each mode runs a fresh A: "0 workers" (A decodes everything itself) and
"1 worker" (A's config names B in `decode_workers`: its streams send part of each batch to
B, which decodes it with its own copy of the dataset, and decode the rest themselves, split
by the measured rates). The data: the photographs (bench/make_photo_folder.py, 2,000 JPEGs;
--folder bench: the bench JPEG folder), the folder itself (imagefolder) registered on both
nodes under one name; configs/pipelines/imagenet_train.yaml; batch 64. The load: one rank on
A (bench/loader_bench --ranks 1, pinned to core 0 too) with a sleeping step per batch
(--compute-ms, default 5 ms: a GPU step, far less than the core's time per batch, so the
run is decode-bound). Per run, over the reader's measured window (after 1 s of warm-up):
images/s, the bytes on A's veth (rx + tx, A's namespace's counters) per image, the CPU
seconds per image of the trainer node (A's emberd + the reader: utime + stime deltas) and of
the worker (B's emberd), and the worker's line of A's `emberctl status` (rows, share,
rows/s, calls, failed calls) mid-window and after the run. Interleaved: every round runs 0
workers and then 1 worker. Target (the remote-decode issue): 1 worker / 0 workers >= 1.8x
images/s (the median of each round's ratio). Needs root (network namespaces) and 2 cores.
Appends to results/workers.md and results/workers.jsonl.

  bench/compare workers_bench [--rounds 2] [--seconds 8] [--compute-ms 5]
      [--folder photos|bench]
"""

import datetime
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

import measure
from emberd import EMBERCTL, Emberd
from scenarios import RunFailed, commit, heading, load1, loadavg, spread, append_record
from scenarios.images import PIPELINE, folder
from scenarios.share_bench import _Others

NAME = "workers_bench"
BUILD = ["//daemon:emberd", "//tools/emberctl:emberctl", "//bench:loader_bench"]
BATCH = 64
MODES = (0, 1)  # decode workers named in A's config
TARGET = 1.8  # 1 worker / 0 workers, images/s
DATASET = "photos"
IP = "ip"
SAMPLE_S = 0.1  # the CPU and byte counters' sampling interval
CORE_A, CORE_B = 0, 1
PREFIX = "ember-wb-"  # the namespaces' names: PREFIX<pid>-<tag>-a and -b


def add_arguments(parser):
    parser.add_argument("--rounds", "--repeat", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--seconds", type=float, default=8,
                        help="measured seconds per run, after 1 s of warm-up (default 8)")
    parser.add_argument("--compute-ms", type=float, default=5,
                        help="a sleeping step per batch in the rank, as a GPU trainer's "
                             "(loader_bench --compute-ms; default 5; 0: none)")
    parser.add_argument("--folder", default="photos", choices=("bench", "photos", "photos-large"),
                        help="the images: the photographs (300-500 px), the same in crops of "
                             "800-1024 px, or the bench JPEG folder (default photos)")


def _ip(*args, check=True):
    done = subprocess.run([IP, *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RunFailed(f"ip {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


class Namespaces:
    """Two network namespaces, a and b, joined by a veth pair (veth-a in a, veth-b in b) with
    10.214.N.1/30 and .2/30, lo up in both: the commands of tests/netns_multinode_test.cc's
    NamespacePair. close() removes them (also after a failed create)."""

    def __init__(self):
        pid = os.getpid()
        tag = random.randrange(100000)
        self.a, self.b = f"{PREFIX}{pid}-{tag}-a", f"{PREFIX}{pid}-{tag}-b"
        subnet = f"10.214.{pid % 256}."
        self.address_a, self.address_b = subnet + "1", subnet + "2"
        self.made = []
        try:
            for name in (self.a, self.b):
                _ip("netns", "add", name)
                self.made.append(name)
            _ip("-n", self.a, "link", "add", "veth-a", "type", "veth", "peer", "name", "veth-b",
                "netns", self.b)
            _ip("-n", self.a, "addr", "add", self.address_a + "/30", "dev", "veth-a")
            _ip("-n", self.b, "addr", "add", self.address_b + "/30", "dev", "veth-b")
            for ns, dev in ((self.a, "veth-a"), (self.b, "veth-b")):
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "link", "set", dev, "up")
        except BaseException:
            self.close()
            raise

    def exec_in(self, ns):
        return [IP, "netns", "exec", ns]

    def veth_a_bytes(self):
        """(rx, tx) bytes of veth-a, from /sys/class/net/veth-a/statistics in namespace a."""
        done = subprocess.run([*self.exec_in(self.a), "cat",
                               "/sys/class/net/veth-a/statistics/rx_bytes",
                               "/sys/class/net/veth-a/statistics/tx_bytes"],
                              capture_output=True, text=True, timeout=30)
        values = done.stdout.split()
        if done.returncode != 0 or len(values) != 2:
            return None
        return int(values[0]), int(values[1])

    def close(self):
        if len(self.made) == 2:
            _ip("-n", self.a, "link", "del", "veth-a", check=False)
        for name in self.made:
            _ip("netns", "del", name, check=False)
        self.made = []


def remove_stale_namespaces():
    """Namespaces an earlier run left behind (killed before its cleanup): PREFIX<pid>-...
    whose pid is gone."""
    done = _ip("netns", "list", check=False)
    for line in done.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.match(re.escape(PREFIX) + r"(\d+)-\d+-[ab]$", name)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            if name.endswith("-a"):
                _ip("-n", name, "link", "del", "veth-a", check=False)
            _ip("netns", "del", name, check=False)


def _children(pid):
    """The pids of pid's children (every thread's), [] if it is gone."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def net_dev(pid, dev):
    """(rx, tx) bytes of `dev` in pid's network namespace (/proc/PID/net/dev: the counters
    of /sys/class/net/DEV/statistics as that namespace sees them), None if absent."""
    try:
        with open(f"/proc/{pid}/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == dev:
                    fields = rest.split()
                    return int(fields[0]), int(fields[8])
    except OSError:
        pass
    return None


class Counters(threading.Thread):
    """Every SAMPLE_S: (unix time, A's emberd CPU, the reader's process tree's CPU, B's
    emberd CPU, veth-a rx bytes, tx bytes). at(t): each counter at unix time t, linear
    between the samples around it."""

    def __init__(self, a_pid, b_pid):
        super().__init__(daemon=True)
        self.a_pid, self.b_pid = a_pid, b_pid
        self.reader_root = None
        self.reader_cpu = {}  # pid -> the last CPU seconds seen (an exited one keeps it)
        self.series = []
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def sample(self):
        now = time.time()
        a = measure.cpu_seconds(self.a_pid)
        b = measure.cpu_seconds(self.b_pid)
        if self.reader_root is not None:
            todo = [self.reader_root]
            while todo:
                pid = todo.pop()
                cpu = measure.cpu_seconds(pid)
                if cpu is not None:
                    self.reader_cpu[pid] = cpu
                todo += _children(pid)
        net = net_dev(self.a_pid, "veth-a")
        if a is None or b is None or net is None:
            return
        with self.lock:
            self.series.append((now, a, sum(self.reader_cpu.values()), b, net[0], net[1]))

    def run(self):
        while not self.stop.wait(SAMPLE_S):
            self.sample()

    def finish(self):
        self.stop.set()
        self.join()
        self.sample()

    def at(self, t):
        with self.lock:
            series = list(self.series)
        if not series:
            return None
        if t <= series[0][0]:
            return series[0][1:]
        for before, after in zip(series, series[1:]):
            if before[0] <= t <= after[0]:
                f = (t - before[0]) / (after[0] - before[0]) if after[0] > before[0] else 0
                return tuple(x + f * (y - x) for x, y in zip(before[1:], after[1:]))
        return series[-1][1:]


WORKER_LINE = re.compile(r"^(\S+)\s+(up|down)\s+rows\s+(\d+) \(\s*([0-9.]+)%\)\s+([0-9.]+) rows/s"
                         r"\s+calls (\d+) failed (\d+)(?:\s+last error: (.*))?$")


def status(socket):
    """A's `emberctl status` (run on core 0, the trainer node's): its decode workers' lines
    and its streams' remote rows."""
    done = subprocess.run(["taskset", "-c", str(CORE_A), EMBERCTL, "--socket", socket, "status"],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        return {"error": done.stderr.strip()}
    workers, section = [], False
    for line in done.stdout.splitlines():
        if line.startswith("decode workers ("):
            section = True
            continue
        if section:
            m = WORKER_LINE.match(line.strip())
            if not m:
                section = False
                continue
            workers.append({"address": m.group(1), "up": m.group(2) == "up",
                            "rows": int(m.group(3)), "share": float(m.group(4)) / 100,
                            "rows_per_s": float(m.group(5)), "calls": int(m.group(6)),
                            "failed_calls": int(m.group(7)), "last_error": m.group(8)})
    remote = [int(x) for x in re.findall(r"remote rows (\d+)", done.stdout)]
    return {"time": time.time(), "workers": workers, "stream_remote_rows": sum(remote),
            "streams": len(re.findall(r"^#\d+", done.stdout, re.M))}


def _certs(ctx, net):
    certs = ctx.tmpdir("certs")
    lib = "source tools/lib/certs.sh"
    subprocess.run(["bash", "-c", f"{lib} && ember_make_ca {certs}"], check=True,
                   stdout=subprocess.DEVNULL)
    for node, address in (("node-a", net.address_a), ("node-b", net.address_b)):
        # kj checks the host name a peer dials against DNS entries only: the address too.
        subprocess.run(["bash", "-c", f"{lib} && ember_make_node_cert {certs} {node} "
                        f"DNS:{address},IP:{address}"], check=True, stdout=subprocess.DEVNULL)
    return certs


def _node(ctx, net, certs, name, ns, address, core, extra):
    directory = ctx.tmpdir(name)
    config = os.path.join(directory, "emberd.yaml")
    with open(config, "w") as f:
        f.write(f"listen: {address}:0\nnode: {name}\ndecode_threads: 1\n"
                f"tls: {{cert: {certs}/{name}.pem, key: {certs}/{name}.key, ca: {certs}/ca.pem}}\n"
                + extra)
    daemon = Emberd(directory, "--config", config, log_level="info",
                    prefix=[*net.exec_in(ns), "taskset", "-c", str(core)])
    daemon.config = config
    return daemon


def _peer_port(daemon):
    with open(os.path.join(daemon.dir, "state", "peer.port")) as f:
        return int(f.read().strip())


def _add_dataset(daemon, path):
    daemon.ctl("dataset", "add", DATASET, "--format", "imagefolder", "--path", path,
               "--pipeline", PIPELINE)


def _affinity(pid):
    with open(f"/proc/{pid}/status") as f:
        m = re.search(r"Cpus_allowed_list:\s*(\S+)", f.read())
    return m.group(1) if m else "?"


def one_run(ctx, args, net, certs, b, worker, path, mode):
    extra = f"decode_workers: [{worker}]\n" if mode else ""
    a = _node(ctx, net, certs, "node-a", net.a, net.address_a, CORE_A, extra)
    counters = proc = None
    try:
        _add_dataset(a, path)
        others = _Others(a.pid, ctx.root)  # outside the run: not naming its directory
        others.mine.add(b.pid)
        others.start()
        counters = Counters(a.pid, b.pid)
        counters.start()
        veth_before = net.veth_a_bytes()
        bench = ["taskset", "-c", str(CORE_A), "bazel-bin/bench/loader_bench", "--socket",
                 a.socket, DATASET, "--ranks", "1", "--batch-size", str(BATCH), "--seconds",
                 str(args.seconds)]
        if args.compute_ms > 0:
            bench += ["--compute-ms", str(args.compute_ms)]
        proc = subprocess.Popen(bench, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        counters.reader_root = proc.pid
        polls = {}
        pollers = []

        def poll(key, delay):
            time.sleep(delay)
            polls[key] = status(a.socket)

        lines = []
        killer = threading.Timer(120 + 4 * args.seconds, lambda: os.killpg(proc.pid, 9))
        killer.start()
        try:
            for line in proc.stdout:
                lines.append(line)
                if "measuring from unix" in line:
                    for key, delay in (("start", 0), ("mid", args.seconds / 2)):
                        t = threading.Thread(target=poll, args=(key, delay), daemon=True)
                        t.start()
                        pollers.append(t)
            proc.wait()
        finally:
            killer.cancel()
        for t in pollers:
            t.join()
        affinity = {"emberd_a": _affinity(a.pid), "emberd_b": _affinity(b.pid)}
        polls["after"] = status(a.socket)
        counters.finish()
        veth_after = net.veth_a_bytes()
        others_cpu, others_top = others.result()
    finally:
        if proc is not None and proc.poll() is None:  # interrupted: the reader goes too
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        a.close()
    out = "".join(lines)
    log = [line.strip() for line in a.log_tail(400).splitlines()
           if re.search(r"\b(warn|warning|error)\b", line, re.I)]
    rate = re.findall(r"bench: samples_per_s=([0-9.]+)", out)
    start = re.findall(r"measuring from unix ([0-9.]+)", out)
    end = re.findall(r"measured (\d+) samples until unix ([0-9.]+)", out)
    if proc.returncode != 0 or not rate or not start or not end:
        ctx.fail(f"workers_bench {mode} worker(s)",
                 out + "\nnode A's log:\n" + "\n".join(log[-10:]))
    t0, t1, samples = float(start[-1]), float(end[-1][1]), int(end[-1][0])
    c0, c1 = counters.at(t0), counters.at(t1)
    d = [y - x for x, y in zip(c0, c1)]  # a cpu, reader cpu, b cpu, rx, tx
    wait = re.findall(r"data wait: ([0-9.]+)", out)
    # The worker between the status polls at the window's start and its middle: the share of
    # the images it decoded, and its rows per CPU second of B's emberd (what its core could
    # give if the split kept it busy).
    interval = {}
    first, mid = _worker({"status": polls}, "start"), _worker({"status": polls}, "mid")
    if first and mid and mid["rows"] > first["rows"]:
        ts, tm = polls["start"]["time"], polls["mid"]["time"]
        b_cpu = counters.at(tm)[2] - counters.at(ts)[2]
        interval = {"worker_share_window": round((mid["rows"] - first["rows"])
                                                 / (float(rate[-1]) * (tm - ts)), 4),
                    "worker_rows_per_cpu_s": round((mid["rows"] - first["rows"]) / b_cpu)
                    if b_cpu > 0 else None}
    record = {"workers": mode, "images_per_s": float(rate[-1]), "samples": samples,
              "window_s": round(t1 - t0, 3),
              "emberd_a_cpu_s": round(d[0], 3), "reader_cpu_s": round(d[1], 3),
              "emberd_b_cpu_s": round(d[2], 3), "veth_a_rx_bytes": int(d[3]),
              "veth_a_tx_bytes": int(d[4]),
              "trainer_cpu_s_per_image": (d[0] + d[1]) / samples if samples else None,
              "worker_cpu_s_per_image": d[2] / samples if samples else None,
              "net_bytes_per_image": (d[3] + d[4]) / samples if samples else None,
              "trainer_cores": round((d[0] + d[1]) / (t1 - t0), 3),
              "worker_cores": round(d[2] / (t1 - t0), 3),
              "data_wait": float(wait[-1]) if wait else None, **interval,
              "veth_a_whole_run": ([y - x for x, y in zip(veth_before, veth_after)]
                                   if veth_before and veth_after else None),
              "status": polls, "affinity": affinity,
              "others_cpu_s": others_cpu, "others_top": others_top,
              "emberd_a_log_warnings": log[-5:], "compute_ms": args.compute_ms}
    return record


def _worker(record, when="after"):
    workers = (record.get("status", {}).get(when) or {}).get("workers") or []
    return workers[0] if workers else None


def _rate(worker):
    return f"{worker['rows_per_s']:,.0f}" if worker else "?"


def _fmt(values, f="{:,.0f}"):
    return spread(values, f)


def report(records):
    by = {}
    for r in records:
        if "failed" not in r:
            by.setdefault(r["workers"], {})[r["round"]] = r
    zero = by.get(0, {})
    lines = ["| workers | images/s | / 0 workers | trainer node CPU ms/image (emberd A + reader) "
             "| trainer node cores | worker CPU ms/image (emberd B) | worker cores "
             "| veth-a bytes/image (rx + tx) | worker share (status after; in the window) "
             "| worker rows/s (mid-window / after; per its CPU s) "
             "| worker rows, calls, failed (after) | data wait | load; others' cores |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios = {}
    for mode in MODES:
        rr = by.get(mode, {})
        if not rr:
            continue
        if mode:
            ratios = {k: r["images_per_s"] / zero[k]["images_per_s"] for k, r in rr.items()
                      if k in zero}
        share = rps = calls = ""
        if mode:
            w = {k: _worker(r) for k, r in rr.items()}
            mid = {k: _worker(r, "mid") for k, r in rr.items()}
            share = (_fmt([x["share"] * 100 for x in w.values() if x], "{:.1f}%") + "; "
                     + _fmt([100 * r.get("worker_share_window") for r in rr.values()
                             if r.get("worker_share_window") is not None], "{:.1f}%"))
            rps = ("; ".join(f"{_rate(mid[k])} / {_rate(w[k])}" for k in sorted(rr)) + "; "
                   + _fmt([r.get("worker_rows_per_cpu_s") for r in rr.values()]))
            calls = "; ".join(f"{w[k]['rows']:,}, {w[k]['calls']}, {w[k]['failed_calls']}"
                              if w[k] else "no worker line" for k in sorted(rr))
        load = "/".join(f"{r['loadavg_1min_before']:.1f}" for _, r in sorted(rr.items()))
        other = "/".join(f"{r['others_cpu_s'] / max(r['window_s'] + 2, 1):.2f}"
                         for _, r in sorted(rr.items()))
        lines.append(
            f"| {mode} | {_fmt([r['images_per_s'] for r in rr.values()])} "
            f"| {_fmt(list(ratios.values()), '{:.2f}x') if mode else ''} "
            f"| {_fmt([1000 * r['trainer_cpu_s_per_image'] for r in rr.values()], '{:.2f}')} "
            f"| {_fmt([r['trainer_cores'] for r in rr.values()], '{:.2f}')} "
            f"| {_fmt([1000 * r['worker_cpu_s_per_image'] for r in rr.values()], '{:.2f}')} "
            f"| {_fmt([r['worker_cores'] for r in rr.values()], '{:.2f}') if mode else ''} "
            f"| {_fmt([r['net_bytes_per_image'] for r in rr.values()])} "
            f"| {share} | {rps} | {calls} "
            f"| {_fmt([r['data_wait'] for r in rr.values()], '{:.2f}')} | {load}; {other} |")
    lines.append("")
    for k in sorted(ratios):
        lines.append(f"- round {k}: 0 workers {zero[k]['images_per_s']:,.0f} images/s, 1 worker "
                     f"{by[1][k]['images_per_s']:,.0f} images/s: {ratios[k]:.2f}x")
    if ratios:
        med = statistics.median(ratios.values())
        lines += ["", f"**Verdict**: 1 worker / 0 workers = {med:.2f}x images/s (median over "
                      f"{len(ratios)} round{'s' if len(ratios) > 1 else ''}, "
                      f"{min(ratios.values()):.2f}-{max(ratios.values()):.2f}x); target >= "
                      f"{TARGET:.1f}x: {'met' if med >= TARGET else '**missed**'}."]
        w = [_worker(r) for r in by.get(1, {}).values()]
        w = [x for x in w if x]
        if w:
            share = statistics.median(x["share"] for x in w)
            # With the split by rates, images/s with the worker is at most local / (1 - share)
            # of what this node decodes alone (if its own decoding kept its pace).
            lines.append(f"The worker decoded {100 * share:.1f}% of the rows (median over "
                         f"rounds; its rows/s as the split measures it: "
                         f"{statistics.median(x['rows_per_s'] for x in w):,.0f}); at that share, "
                         f"the trainer node decoding at its 0-worker pace would give at most "
                         f"{1 / (1 - share) if share < 1 else float('inf'):.2f}x.")
    return "\n".join(lines)


def main(ctx, args):
    if os.geteuid() != 0:
        raise RunFailed("workers_bench needs root: it makes network namespaces")
    if (os.cpu_count() or 1) < 2:
        raise RunFailed("workers_bench needs 2 cores (one per node)")
    if args.rounds < 1:
        raise RunFailed("--rounds must be at least 1")
    ctx.build(BUILD)
    path = folder(ctx, args.folder)
    # SIGTERM runs the cleanup as an interrupt would (namespaces, daemons).
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    remove_stale_namespaces()
    start = datetime.datetime.now(datetime.timezone.utc)
    load_start = loadavg()
    records = []
    jsonl = os.path.join(ctx.results, "workers.jsonl")
    os.makedirs(ctx.results, exist_ok=True)
    net = Namespaces()
    b = None
    try:
        certs = _certs(ctx, net)
        b = _node(ctx, net, certs, "node-b", net.b, net.address_b, CORE_B, "lend_decode: true\n")
        _add_dataset(b, path)
        worker = f"{net.address_b}:{_peer_port(b)}"
        ctx.log(f"namespaces {net.a} ({net.address_a}) and {net.b} ({net.address_b}); "
                f"worker {worker}")
        for round_ in range(1, args.rounds + 1):
            for mode in MODES:
                load = load1()
                ctx.log(f"round {round_}/{args.rounds}: {mode} worker(s) (load {load:.2f})")
                try:
                    record = one_run(ctx, args, net, certs, b, worker, path, mode)
                except Exception as e:  # noqa: BLE001 (one failed run loses its row)
                    ctx.log(f"{type(e).__name__}: {e}")
                    record = {"workers": mode, "failed": f"{type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}"}
                append_record(records, jsonl, record, round=round_,
                              loadavg_1min_before=round(load, 2), folder=args.folder,
                              command=args.command)
                w = _worker(record)
                shown = {k: record.get(k) for k in ("images_per_s", "trainer_cpu_s_per_image",
                                                     "worker_cpu_s_per_image",
                                                     "net_bytes_per_image", "failed")
                         if k in record}
                if w:
                    shown["worker"] = {k: w[k] for k in ("share", "rows_per_s", "rows", "calls",
                                                         "failed_calls")}
                ctx.log(f"  {json.dumps(shown)}")
    finally:
        if b is not None:
            b.close()
        net.close()
        signal.signal(signal.SIGTERM, previous)
    minutes = (datetime.datetime.now(datetime.timezone.utc) - start).total_seconds() / 60
    failed = [f"{r['workers']} worker(s) (round {r['round']}): {r['failed']}"
              for r in records if "failed" in r]
    note = (f" (commit {commit()}; {minutes:.0f} min; load averages at the start {load_start}, "
            f"at the end {loadavg()})")
    step = (f"a sleeping step of {args.compute_ms:g} ms per batch" if args.compute_ms > 0
            else "no step")
    text = heading(args.command, note) + (
        f"Two emberd as two nodes in two network namespaces joined by a veth pair, mutual TLS "
        f"(one CA), `decode_threads: 1` each: node A (the trainer's) and its reader on core "
        f"{CORE_A}, node B (`lend_decode: true`) on core {CORE_B} (`taskset`). 0 workers: A "
        f"decodes everything; 1 worker: A's config has `decode_workers: [B]` (a fresh A per "
        f"run, B up throughout). The {args.folder} folder (2,000 JPEGs, imagefolder, the same "
        f"path and name on both nodes); {PIPELINE}; batch {BATCH}; 1 rank "
        f"(`loader_bench --ranks 1`, {step}: decode-bound); {args.seconds:g} s measured after "
        f"1 s of warm-up; medians over {args.rounds} round{'s' if args.rounds > 1 else ''} "
        "(min-max), each round 0 workers then 1 worker; the ratio is the median of each "
        "round's. Over the reader's window: trainer node CPU = A's emberd + the reader "
        "(utime + stime, /proc/PID/stat, sampled every 0.1 s), worker CPU = B's emberd, "
        "bytes = veth-a's rx + tx (A's namespace's counters); trainer node cores = its CPU "
        "seconds / window seconds (at most 1: one core). Worker share, rows/s, rows, calls, "
        "failed: A's `emberctl status` \"decode workers\" line (share: of all rows A's "
        "streams decoded, since A started; rows/s: the split's measured rate, rows of a call "
        "/ the time since it began or the worker's previous answer) mid-window and after the run (per round). Others' cores: CPU of "
        "processes outside the run / (window + 2 s).\n\n" + report(records) + "\n")
    if failed:
        text += "\nFailed runs, left out: " + "; ".join(failed) + "\n"
    ctx.append("workers.md", text)
    return 1 if failed else 0
