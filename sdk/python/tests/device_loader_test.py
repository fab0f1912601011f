"""ember.DeviceLoader against a real emberd: batches on the GPU equal to the host loader's,
from the registered ring and through pinned memory, slots handed back, state_dict. Its GPU
cases skip (saying so) where torch sees no CUDA device; the refusal without one runs
everywhere."""

import unittest

import torch

import ember
import ember_testing as et

HAVE_CUDA = torch.cuda.is_available()


class DeviceLoaderWithoutCudaTest(unittest.TestCase):
    def test_options_it_cannot_take_are_refused(self):
        for option in ({"output": "numpy"}, {"reconnect_timeout": 5.0}):
            with self.assertRaisesRegex(ember.InvalidArgument, "takes no"):
                ember.DeviceLoader("synth", 10, **option)

    @unittest.skipIf(HAVE_CUDA, "a CUDA device is visible")
    def test_refused_without_a_cuda_device(self):
        with self.assertRaisesRegex(ember.FailedPrecondition,
                                    r"needs a CUDA device: torch .* sees none"):
            ember.DeviceLoader("synth", 10)


@unittest.skipUnless(HAVE_CUDA, "SKIP: no CUDA device visible to torch")
class DeviceLoaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = et.Daemon(slots=3)
        cls.daemon.add_synthetic("synth", 600)
        cls.client = cls.daemon.client()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def options(self, **kwargs):
        options = dict(epochs=2, rank=0, world_size=1, client=self.client, sample_ids=True,
                       seed=7)
        options.update(kwargs)
        return options

    def host_epochs(self):
        loader = ember.Loader("synth", 40, job="host", **self.options())
        epochs = []
        for _ in range(2):
            epochs.append([{k: v.clone() for k, v in batch.items()} for batch in loader])
        return epochs

    def check_equal_to_host(self, register_ring):
        expected = self.host_epochs()
        loader = ember.DeviceLoader("synth", 40, job=f"device-{register_ring}",
                                    register_ring=register_ring, **self.options())
        self.assertEqual(loader.ring_registered, register_ring, loader.registration_error)
        for epoch in range(2):
            batches = list(loader)
            self.assertEqual(len(batches), len(expected[epoch]))
            for got, want in zip(batches, expected[epoch]):
                self.assertEqual(got.epoch, epoch)
                for name, tensor in want.items():
                    self.assertEqual(got[name].device, torch.device("cuda", 0))
                    self.assertTrue(torch.equal(got[name].cpu(), tensor), name)
        # 2 epochs of 15 batches through 3 slots: each slot went back and was reused.
        self.assertEqual(loader.stats()["batches"], 30)
        loader.close()

    def test_batches_from_the_registered_ring_equal_the_host_loaders(self):
        self.check_equal_to_host(register_ring=True)

    def test_batches_through_pinned_memory_equal_the_host_loaders(self):
        self.check_equal_to_host(register_ring=False)

    def test_state_dict_is_after_the_last_batch_returned(self):
        loader = ember.DeviceLoader("synth", 40, job="state", **self.options())
        epoch = iter(loader)
        for _ in range(4):
            next(epoch)
        state = loader.state_dict()
        self.assertEqual((state["epoch"], state["position"]), (0, 160))
        loader.close()
        resumed = ember.DeviceLoader("synth", 40, job="state", **self.options())
        resumed.load_state_dict(state)
        ids = [i for b in resumed for i in b["sample_id"].reshape(-1).tolist()]
        self.assertEqual(len(ids), 600 - 160)
        resumed.close()


if __name__ == "__main__":
    unittest.main()
