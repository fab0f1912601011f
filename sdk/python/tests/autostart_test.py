"""A daemon on demand from Python: with no EMBER_SOCKET and no system daemon, the first
ember.Loader of a user, given the data's path, starts a private emberd, registers the
path there and reads it; the daemon stops once idle. emberctl finds a running private
daemon and starts none."""

import os
import re
import signal
import subprocess
import tempfile
import textwrap
import time
import unittest

import ember_testing as et

SCRIPT = textwrap.dedent("""
    import sys, ember
    # No socket given, none set, none serving; the data by its path, nothing registered.
    loader = ember.Loader(sys.argv[1], 100, epochs=1, rank=0, world_size=1)
    batches = sum(1 for _ in loader)
    again = ember.Loader(sys.argv[1], 100, epochs=1, rank=0, world_size=1, job="again")
    client = ember.Client()
    names = [d.name for d in client.list_datasets()]
    print(client.socket, batches, len(again), names == [loader.dataset])
""")


class AutostartTest(unittest.TestCase):
    def test_a_client_with_no_daemon_starts_a_private_one(self):
        with tempfile.TemporaryDirectory(prefix="ember-autostart-", dir="/tmp") as tmp:
            data = os.path.join(tmp, "data")
            os.makedirs(data)
            et.write_synthetic_idx(data, "train", 1000)
            env = {k: v for k, v in os.environ.items() if k != "EMBER_SOCKET"}
            env.update(XDG_RUNTIME_DIR=os.path.join(tmp, "run"),
                       XDG_CACHE_HOME=os.path.join(tmp, "cache"),
                       EMBER_EMBERD=et.runfile("daemon/emberd"), EMBER_IDLE_EXIT="2")
            os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700)
            done = subprocess.run([et.python(), "-c", SCRIPT, data], env=env,
                                  capture_output=True, text=True, timeout=120)
            self.assertEqual(done.returncode, 0, done.stderr)
            socket = os.path.join(tmp, "run", "ember", "emberd.sock")
            used, batches, per_epoch, one_name = done.stdout.split()
            self.assertEqual(used, socket)
            self.assertEqual((int(batches), int(per_epoch), one_name), (10, 10, "True"))
            deadline = time.monotonic() + 15
            while os.path.exists(socket) and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertFalse(os.path.exists(socket), "the private emberd did not stop when idle")
            with open(os.path.join(tmp, "run", "ember", "emberd.log")) as log:
                self.assertIn("(idle_exit)", log.read())

    def test_emberctl_finds_a_running_private_daemon_and_starts_none(self):
        with tempfile.TemporaryDirectory(prefix="ember-autostart-", dir="/tmp") as tmp:
            env = {k: v for k, v in os.environ.items() if k != "EMBER_SOCKET"}
            env.update(XDG_RUNTIME_DIR=os.path.join(tmp, "run"),
                       XDG_CACHE_HOME=os.path.join(tmp, "cache"),
                       EMBER_EMBERD=et.runfile("daemon/emberd"), EMBER_IDLE_EXIT="60")
            os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700)
            socket = os.path.join(tmp, "run", "ember", "emberd.sock")
            emberctl = [et.runfile("tools/emberctl/emberctl"), "--timeout", "10", "status"]
            before = subprocess.run(emberctl, env=env, capture_output=True, text=True,
                                    timeout=60)
            self.assertNotEqual(before.returncode, 0)
            self.assertIn("no emberd answers on /run/ember/emberd.sock", before.stderr)
            self.assertIn("no private emberd of yours", before.stderr)
            self.assertFalse(os.path.exists(socket), "emberctl status started a daemon")
            # A trainer's client starts the user's private daemon; emberctl then finds it.
            subprocess.run([et.python(), "-c", "import ember; ember.Client().status()"],
                           env=env, check=True, timeout=120)
            after = subprocess.run(emberctl, env=env, capture_output=True, text=True,
                                   timeout=60)
            self.assertEqual(after.returncode, 0, after.stderr)
            self.assertIn(f"on {socket};", after.stdout)
            pid = int(re.search(r" pid (\d+) ", after.stdout).group(1))
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while os.path.exists(socket) and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertFalse(os.path.exists(socket), "the private emberd did not stop")


if __name__ == "__main__":
    unittest.main()
