"""A Python rank killed or interrupted: Ctrl-C ends a wait for a batch; a SIGKILLed rank
leaves nothing behind in the daemon."""

import os
import signal
import subprocess
import textwrap
import time
import unittest

import ember
import ember_testing as et

RANK = textwrap.dedent("""
    import sys, time, ember
    loader = ember.Loader("synth", 20, job=sys.argv[2], rank=0, world_size=1,
                          client=ember.Client(sys.argv[1]))
    taken = 0
    try:
        while True:               # epochs=None: each pass is the next epoch
            for batch in loader:
                taken += 1
                if taken == 1:
                    print("ready", flush=True)
                if sys.argv[3] == "hold":
                    held = batch
                    time.sleep(3600)
    except KeyboardInterrupt:
        print(f"interrupted after {taken} batches", flush=True)
        sys.exit(0)
""")


class ProcessTest(unittest.TestCase):
    def setUp(self):
        self.daemon = et.Daemon()
        self.daemon.add_synthetic("synth", 400)

    def tearDown(self):
        self.daemon.stop()

    def spawn(self, job, mode):
        child = subprocess.Popen([et.python(), "-c", RANK, self.daemon.socket, job, mode],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=dict(os.environ))
        line = child.stdout.readline()
        if line.strip() != "ready":
            child.kill()
            self.fail(f"rank did not start: {line!r} {child.stderr.read()}")
        return child

    def test_ctrl_c_interrupts_a_wait_for_a_batch(self):
        child = self.spawn("interrupt", "drain")
        os.kill(self.daemon.pid, signal.SIGSTOP)  # no batch comes any more
        try:
            time.sleep(1.0)  # the rank drains the ring and waits
            os.kill(child.pid, signal.SIGINT)
            out, err = child.communicate(timeout=10)
        finally:
            os.kill(self.daemon.pid, signal.SIGCONT)
        self.assertEqual(child.returncode, 0, err)
        self.assertRegex(out, r"interrupted after \d+ batches")

    def test_a_daemon_gone_for_good_raises_unavailable(self):
        loader = ember.Loader("synth", 20, job="gone", rank=0, world_size=1,
                              client=self.daemon.client(), reconnect_timeout=1.0)
        epoch = iter(loader)
        next(epoch)
        os.kill(self.daemon.pid, signal.SIGKILL)
        self.daemon.process.wait()
        started = time.monotonic()
        with self.assertRaises(ember.Unavailable) as raised:
            for _ in range(1000):  # the batches already in the ring, then the loss
                next(epoch)
        self.assertLess(time.monotonic() - started, 10)
        self.assertIn("gave up reconnecting to emberd at " + self.daemon.socket,
                      raised.exception.message)

    def test_sigkilled_rank_leaks_nothing_in_the_daemon(self):
        client = self.daemon.client()
        client.status()  # a round trip: emberd has accepted the client's connection
        fds_before = et.count_fds(self.daemon.pid)
        targets_before = et.fd_targets(self.daemon.pid)
        shm_before = sorted(os.listdir("/dev/shm"))
        for round_ in range(3):
            child = self.spawn(f"killed-{round_}", "hold")
            self.assertEqual(len(client.status().streams), 1)
            child.kill()
            child.wait()
            child.stdout.close()
            child.stderr.close()
            self.assertTrue(et.eventually(lambda: not client.status().streams),
                            "the killed rank's stream is still open")
            self.assertTrue(et.eventually(
                lambda: client.status().shm_bytes_in_use == 0),
                "the killed rank's ring is still accounted")
        self.assertTrue(et.eventually(lambda: et.count_fds(self.daemon.pid) == fds_before),
                        f"emberd's descriptors {et.fd_targets(self.daemon.pid)}, before the "
                        f"ranks {targets_before}")
        self.assertEqual(sorted(os.listdir("/dev/shm")), shm_before)


if __name__ == "__main__":
    unittest.main()
