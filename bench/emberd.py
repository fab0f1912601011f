"""A private emberd for the Python benchmarks (bench/compare and its scenarios), run from
the built tree (bazel-bin): its own socket and state directory in a temporary
directory, stopped and removed on close. The Python twin of tools/lib/emberd.sh.

    with Emberd(tmpdir) as daemon:
        daemon.ctl("dataset", "add", "fmnist-train", "--format", "idx", ...)
        measure.run(cmd, pids=[daemon.pid], env={**os.environ, "EMBER_SOCKET": daemon.socket})
"""

import os
import signal
import subprocess
import time

BIN = "bazel-bin"
EMBERD = f"{BIN}/daemon/emberd"
EMBERCTL = f"{BIN}/tools/emberctl/emberctl"
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 20


class EmberdError(RuntimeError):
    pass


class Emberd:
    def __init__(self, directory, *flags, env=None, log_level="warn", prefix=()):
        """`prefix`: a command that execs emberd (e.g. `ip netns exec NS taskset -c 0`),
        so that self.pid is still emberd's."""
        self.dir = directory
        self.socket = os.path.join(directory, "emberd.sock")
        self.log_path = os.path.join(directory, "emberd.log")
        os.makedirs(directory, exist_ok=True)
        env = {k: v for k, v in (env or os.environ).items() if k != "NOTIFY_SOCKET"}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [*prefix, EMBERD, "--socket", self.socket,
                 "--state-dir", os.path.join(directory, "state"), "--log-level", log_level,
                 *flags],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise EmberdError(f"emberd exited with status {self.proc.returncode} before "
                                  f"serving; the end of {self.log_path}:\n{self.log_tail()}")
            if subprocess.run([EMBERCTL, "--socket", self.socket, "status"],
                              capture_output=True).returncode == 0:
                break
            if time.monotonic() > deadline:
                self.close()
                raise EmberdError(f"emberd did not answer on {self.socket} within "
                                  f"{START_TIMEOUT_S} s; the end of {self.log_path}:\n"
                                  f"{self.log_tail()}")
            time.sleep(0.1)

    @property
    def pid(self):
        return self.proc.pid

    def log_tail(self, lines=20):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def ctl(self, *args, timeout=600):
        """Runs emberctl on this daemon's socket; returns its stdout, raises with its
        stderr if it fails."""
        done = subprocess.run([EMBERCTL, "--socket", self.socket, *args], capture_output=True,
                              text=True, timeout=timeout)
        if done.returncode != 0:
            raise EmberdError(f"emberctl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def env(self):
        return {**os.environ, "EMBER_SOCKET": self.socket}

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
