"""Helpers for the Python SDK's tests: a real emberd in a private directory and small
synthetic IDX datasets (the same as tests/support/test_env.h writes)."""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional

import ember


def runfile(path: str) -> str:
    """A file of the workspace in the test's runfiles, e.g. runfile("daemon/emberd")."""
    root = os.environ.get("TEST_SRCDIR") or os.environ.get("RUNFILES_DIR")
    if not root:
        raise RuntimeError("no TEST_SRCDIR: run the test with bazel test")
    return os.path.join(root, os.environ.get("TEST_WORKSPACE", "ember"), path)


def write_synthetic_idx(directory: str, prefix: str, count: int, rows: int = 28,
                        cols: int = 28) -> None:
    """<directory>/<prefix>-{images-idx3,labels-idx1}-ubyte.gz with `count` samples; sample
    i's first four pixels hold i (little-endian), its label is i % 10."""
    images = bytearray(struct.pack(">IIII", 0x0803, count, rows, cols))
    for i in range(count):
        pixels = bytearray((i + k) % 251 for k in range(rows * cols))
        pixels[0:4] = struct.pack("<I", i)
        images += pixels
    labels = bytearray(struct.pack(">II", 0x0801, count)) + bytes(i % 10 for i in range(count))
    with gzip.open(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"), "wb") as f:
        f.write(images)
    with gzip.open(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(labels)


def read_samples(client: ember.Client, path: str, pipeline: str, **kwargs) -> Dict[int, dict]:
    """One epoch of the dataset at `path` in order, as one rank of 1 with batches of 4:
    sample id -> its tensors (copies). `kwargs` go to ember.Loader."""
    loader = ember.Loader(path, 4, epochs=1, rank=0, world_size=1, client=client,
                          shuffle=False, sample_ids=True, pipeline=pipeline, **kwargs)
    out = {}
    for batch in loader:
        for k, i in enumerate(batch["sample_id"].reshape(-1).tolist()):
            out[i] = {name: tensor[k].clone() for name, tensor in batch.items()}
    return out


class Daemon:
    """A private emberd on <tmp>/emberd.sock (2 decode threads, 256 MiB of shared memory,
    `slots` ring slots), stopped and its directory removed by stop() / the with block.
    `env`: variables set in its environment besides this process's (e.g. AWS_*).
    `directory`: another daemon's (killed) directory, to start again on its state."""

    def __init__(self, slots: int = 4, extra_args: Optional[List[str]] = None,
                 env: Optional[Dict[str, str]] = None, directory: Optional[str] = None) -> None:
        self.dir = directory or tempfile.mkdtemp(prefix="ember-py-", dir="/tmp")
        self.socket = os.path.join(self.dir, "emberd.sock")
        self.log_path = os.path.join(self.dir, "emberd.log")
        argv = [runfile("daemon/emberd"), f"--socket={self.socket}",
                f"--state-dir={self.dir}/state", "--decode-threads=2", "--shm-budget=256MiB",
                f"--ring-slots={slots}", "--log-level=info"] + (extra_args or [])
        env = dict({k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}, **(env or {}))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 20
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"emberd exited during start-up:\n{self.log()}")
            try:
                ember.Client(self.socket, connect_timeout=0.5).status()
                break
            except ember.Unavailable:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"emberd did not answer within 20 s:\n{self.log()}")
                time.sleep(0.05)

    @property
    def pid(self) -> int:
        return self.process.pid

    def client(self) -> ember.Client:
        return ember.Client(self.socket, connect_timeout=5.0)

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def add_synthetic(self, name: str, count: int, split: str = "train") -> ember.DatasetInfo:
        """Registers a synthetic IDX dataset of `count` samples under <dir>/<name>."""
        data = os.path.join(self.dir, name)
        os.makedirs(data)
        write_synthetic_idx(data, "train" if split == "train" else "t10k", count)
        return self.client().add_dataset(name, data, split=split)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Daemon":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class Nodes:
    """`count` emberds as the nodes of one machine (see Daemon): each with a peer port on
    127.0.0.1 and mutual TLS with a certificate from a CA made for the test (openssl, as
    tools/lib/certs.sh makes them), node i named "node<i>"; `coordinator` is node 0's
    peer address. Stopped, with their certificates, by stop() / the with block."""

    def __init__(self, count: int = 2) -> None:
        self.certs = tempfile.mkdtemp(prefix="ember-py-certs-", dir="/tmp")
        self.daemons: List[Daemon] = []
        try:
            self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
                          "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
                          "-out", "ca.pem", "-days", "1", "-subj", "/CN=ember-test-ca")
            for i in range(count):
                self.daemons.append(self._node(f"node{i}"))
        except BaseException:
            self.stop()
            raise
        with open(os.path.join(self.daemons[0].dir, "state", "peer.port")) as f:
            self.coordinator = f"127.0.0.1:{f.read().strip()}"

    def _openssl(self, *args: str) -> None:
        done = subprocess.run(["openssl", *args], cwd=self.certs, capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise RuntimeError(f"openssl {args[0]} failed: {done.stderr}")

    def _node(self, name: str) -> Daemon:
        with open(os.path.join(self.certs, f"{name}.ext"), "w") as f:
            f.write("subjectAltName=DNS:localhost,DNS:127.0.0.1,IP:127.0.0.1\n"
                    "extendedKeyUsage=serverAuth,clientAuth\n")
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                      "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        self._openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                      "-CAcreateserial", "-days", "1", "-extfile", f"{name}.ext",
                      "-out", f"{name}.pem")
        config = os.path.join(self.certs, f"{name}.yaml")
        with open(config, "w") as f:
            f.write(f"listen: 127.0.0.1:0\nnode: {name}\n"
                    f"tls: {{cert: {self.certs}/{name}.pem, key: {self.certs}/{name}.key, "
                    f"ca: {self.certs}/ca.pem}}\n")
        return Daemon(extra_args=[f"--config={config}"])

    def stop(self) -> None:
        for daemon in self.daemons:
            daemon.stop()
        shutil.rmtree(self.certs, ignore_errors=True)

    def __enter__(self) -> "Nodes":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def count_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_targets(pid: int) -> List[str]:
    """What the process's descriptors point at (socket:[N], /path, anon_inode:...)."""
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass  # closed meanwhile
    return sorted(targets)


def eventually(predicate, timeout: float = 10.0) -> bool:
    """Polls `predicate` every 20 ms until it holds or `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def memfd_ranges() -> List[tuple]:
    """The address ranges of this process's memfd mappings (the rings it has mapped)."""
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5].startswith("/memfd:"):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                ranges.append((start, end))
    return ranges


def python() -> str:
    return sys.executable


def run_ranks(rank_main, world_size: int, timeout: float = 60.0) -> list:
    """Runs rank_main(rank) for each rank on its own thread (ranks of one job must run at
    once) and returns their results by rank; raises the first rank's error, or
    AssertionError if a rank is still running after `timeout` seconds."""
    results = [None] * world_size
    errors = []

    def run(rank):
        try:
            results[rank] = rank_main(rank)
        except Exception as e:  # noqa: BLE001 - raised by the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    if any(t.is_alive() for t in threads):
        raise AssertionError(f"a rank did not finish in {timeout:g} s")
    if errors:
        raise errors[0]
    return results


class Nginx:
    """Debian's nginx serving `root` on a free loopback port (a real HTTP server with byte
    ranges), its files in a temporary directory; stopped by the with block."""

    def __init__(self, root: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="nginx-", dir=os.environ.get("TEST_TMPDIR"))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        user = "user root root;\n" if os.geteuid() == 0 else ""
        temp = "".join(f"  {k}_temp_path {self.dir}/{k};\n"
                       for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"{user}daemon off;\nmaster_process off;\npid {self.dir}/nginx.pid;\n"
                    f"error_log {self.dir}/error.log warn;\nevents {{}}\n"
                    f"http {{\n  access_log off;\n{temp}"
                    f"  server {{ listen 127.0.0.1:{self.port}; root {root}; }}\n}}\n")
        self.process = subprocess.Popen(["/usr/sbin/nginx", "-q", "-e", f"{self.dir}/error.log",
                                         "-p", self.dir, "-c", conf])
        if not eventually(self._answers, timeout=10):
            self.__exit__()
            raise RuntimeError(f"nginx did not answer on port {self.port}: {self.dir}/error.log")

    def _answers(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def __enter__(self) -> "Nginx":
        return self

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def writers_python() -> str:
    """The python of the formats' reference writers (webdataset, mosaicml-streaming):
    $FORMAT_WRITERS_PYTHON, which tools/test passes (tools/install-deps --writers-python)."""
    python = os.environ.get("FORMAT_WRITERS_PYTHON", "")
    if not python or not os.access(python, os.X_OK):
        raise RuntimeError("FORMAT_WRITERS_PYTHON is unset or not a program: run ./tools/test "
                           "(tools/install-deps installs the formats' reference writers)")
    return python
