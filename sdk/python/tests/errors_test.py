"""Daemon and SDK errors raise the ember.Error subclass of their code, with the message."""

import os
import unittest

import ember
import ember_testing as et


class ErrorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = et.Daemon()
        cls.daemon.add_synthetic("synth", 200)
        cls.client = cls.daemon.client()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def test_unknown_dataset_is_not_found(self):
        with self.assertRaises(ember.NotFound) as raised:
            self.client.inspect_dataset("nope")
        error = raised.exception
        self.assertEqual(error.code, "not_found")
        self.assertIn("dataset 'nope'", error.message)
        self.assertIsInstance(error, ember.Error)
        self.assertIsInstance(error, LookupError)
        with self.assertRaises(ember.NotFound) as raised:
            next(iter(ember.Loader("nope", 10, job="j", client=self.client)))
        self.assertIn("nope", str(raised.exception))

    def test_bad_registration_names_the_path(self):
        missing = os.path.join(self.daemon.dir, "no-such-dir")
        with self.assertRaises(ember.Error) as raised:
            self.client.add_dataset("bad", missing)
        self.assertIn(missing, raised.exception.message)
        with self.assertRaises(ember.AlreadyExists):
            self.client.add_dataset("synth", os.path.join(self.daemon.dir, "synth"))

    def test_rank_outside_the_world_is_invalid_argument(self):
        loader = ember.Loader("synth", 10, job="bad-rank", rank=2, world_size=2,
                              client=self.client)
        with self.assertRaises(ember.InvalidArgument) as raised:
            iter(loader)
        self.assertIsInstance(raised.exception, ValueError)
        self.assertIn("rank", raised.exception.message)

    def test_no_daemon_is_unavailable_naming_the_socket(self):
        socket = os.path.join(self.daemon.dir, "nobody.sock")
        with self.assertRaises(ember.Unavailable) as raised:
            ember.Client(socket, connect_timeout=0.2)
        self.assertIn(socket, raised.exception.message)
        self.assertIsInstance(raised.exception, ConnectionError)

    def test_store_wait_past_its_timeout_is_deadline_exceeded(self):
        with self.assertRaises(ember.DeadlineExceeded) as raised:
            self.client.kv_get("kv-job", "never", 0.05)
        self.assertIn("never", raised.exception.message)
        with self.assertRaises(ember.InvalidArgument):
            self.client.kv_get("kv-job", "never", -1.0)

    def test_listing_and_status(self):
        names = [d.name for d in self.client.list_datasets()]
        self.assertIn("synth", names)
        info = self.client.inspect_dataset("synth")
        self.assertEqual(info.count, 200)
        self.assertEqual([t.name for t in info.tensors], ["image", "label"])
        status = self.client.status()
        self.assertEqual(status.pid, self.daemon.pid)
        self.assertGreater(status.shm_bytes_budget, 0)


if __name__ == "__main__":
    unittest.main()
