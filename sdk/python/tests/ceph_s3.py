"""A real S3 server for the SDK's tests: Debian's Ceph (a monitor, one OSD on memstore and
radosgw) started by tools/ceph-s3 on a free loopback port, with an S3 user of random keys.

    with ceph_s3.CephS3(tmpdir) as s3:
        s3.put("bucket", local_dir, "prefix")
        env = s3.env()  # AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION

Everything (configuration, in-memory data, logs, pids) lives in <tmpdir>/ceph-s3-N; the
cluster stops when the with block ends, or when this process dies (the script's standard
input, a pipe from here, ends).
"""

from __future__ import annotations

import itertools
import os
import select
import subprocess
import time
from typing import Dict, Tuple

_START_TIMEOUT_S = 90
_count = itertools.count()


def _script() -> str:
    root = os.environ.get("TEST_SRCDIR") or os.environ.get("RUNFILES_DIR")
    if not root:
        raise RuntimeError("no TEST_SRCDIR: run the test with bazel test")
    return os.path.join(root, os.environ.get("TEST_WORKSPACE", "ember"), "tools", "ceph-s3")


def _parse(text: str) -> Dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


class CephS3:
    """A private S3 server; its fields are set by start() (or entering the with block):
    dir (the cluster's directory, logs in dir/log), endpoint ("http://127.0.0.1:PORT"),
    access_key, secret_key and region (what SigV4 signs with)."""

    def __init__(self, tmpdir: str, port: int = 0) -> None:
        self.dir = os.path.join(os.fspath(tmpdir), "ceph-s3-%d-%d" % (os.getpid(), next(_count)))
        self.port = port
        self.endpoint = self.access_key = self.secret_key = self.region = ""
        self._script = _script()
        self._process = None

    def start(self) -> "CephS3":
        """Starts the server; raises RuntimeError (naming the log) if it does not answer an
        authenticated S3 request within a minute, having stopped what it started."""
        argv = [self._script, "start", self.dir, "--foreground"]
        if self.port:
            argv += ["--port", str(self.port)]
        self._process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        out = b""
        deadline = time.monotonic() + _START_TIMEOUT_S
        ended = False
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self._process.stdout], [], [],
                                        max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(self._process.stdout.fileno(), 4096)
            if not chunk:
                ended = True
                break
            out += chunk
        self._process.stdout.close()
        values = _parse(out.decode())
        self.endpoint = values.get("EMBER_S3_ENDPOINT", "")
        self.access_key = values.get("AWS_ACCESS_KEY_ID", "")
        self.secret_key = values.get("AWS_SECRET_ACCESS_KEY", "")
        self.region = values.get("AWS_REGION", "")
        if not (ended and self.endpoint and self.access_key and self.secret_key and self.region):
            self._finish(kill=not ended)
            log = os.path.join(self.dir, "log", "ceph-s3.log")
            try:
                with open(log) as f:
                    details = f.read()
            except OSError:
                details = ""
            raise RuntimeError("the Ceph S3 server did not start; see %s:\n%s" % (log, details))
        return self

    def stop(self) -> None:
        """Stops the cluster and waits until none of its processes is left. Idempotent."""
        if self._process is None:
            return
        subprocess.run([self._script, "stop", self.dir], stdin=subprocess.DEVNULL, check=False,
                       timeout=120)
        self._finish(kill=False)

    def _finish(self, kill: bool) -> None:
        process, self._process = self._process, None
        if kill:
            process.terminate()
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if kill:
            subprocess.run([self._script, "stop", self.dir], stdin=subprocess.DEVNULL,
                           check=False, timeout=120)

    def env(self) -> Dict[str, str]:
        """The variables emberd's S3 client (and the AWS SDKs) read: the endpoint as
        AWS_ENDPOINT_URL_S3 (and EMBER_S3_ENDPOINT), the keys and the region."""
        return {"EMBER_S3_ENDPOINT": self.endpoint, "AWS_ENDPOINT_URL_S3": self.endpoint,
                "AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": self.region}

    def put(self, bucket: str, local_path: str, prefix: str = "") -> None:
        """Creates `bucket` if needed and uploads the file `local_path` as <prefix>/<name>,
        or every file under the directory `local_path` as <prefix>/<relative path>."""
        self._run("put", bucket, os.fspath(local_path), prefix)

    def new_user(self, name: str) -> Tuple[str, str]:
        """Creates another S3 user; returns its (access key, secret key)."""
        values = _parse(self._run("mkuser", name))
        return values["AWS_ACCESS_KEY_ID"], values["AWS_SECRET_ACCESS_KEY"]

    def _run(self, command: str, *args: str) -> str:
        result = subprocess.run([self._script, command, self.dir, *args], capture_output=True,
                                stdin=subprocess.DEVNULL, timeout=120)
        if result.returncode != 0:
            raise RuntimeError("ceph-s3 %s failed (exit code %d): %s" % (
                command, result.returncode, result.stderr.decode(errors="replace").strip()))
        return result.stdout.decode()

    def __enter__(self) -> "CephS3":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
