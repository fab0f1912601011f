"""ember.Loader against a real emberd: zero copy, slots held and released, exactly once
across ranks, resume from state_dict(), share groups."""

import gc
import os
import threading
import unittest

import numpy
import torch

import ember
import ember_testing as et


def address_of(tensor) -> int:
    if isinstance(tensor, numpy.ndarray):
        return tensor.ctypes.data
    if isinstance(tensor, torch.Tensor):
        return tensor.data_ptr()
    return tensor.data_ptr  # a DLPack SlotTensor


def in_ring(tensor) -> bool:
    address = address_of(tensor)
    return any(start <= address < end for start, end in et.memfd_ranges())


def mapping_permissions(address: int) -> str:
    """The permissions ("rw-s", ...) of this process's mapping holding `address`."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if start <= address < end:
                return fields[1]
    return ""


def ids_of(batch) -> list:
    return batch["sample_id"].reshape(-1).tolist()


class LoaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = et.Daemon(slots=4)
        cls.daemon.add_synthetic("synth", 1000)
        cls.client = cls.daemon.client()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def loader(self, job, **kwargs):
        options = dict(batch_size=50, epochs=1, rank=0, world_size=1, client=self.client,
                       sample_ids=True)
        options.update(kwargs)
        return ember.Loader("synth", job=job, **options)

    def test_batches_are_views_into_the_ring(self):
        loader = self.loader("zero-copy")
        batch = next(iter(loader))
        image = batch["image"]
        self.assertEqual(image.dtype, torch.uint8)
        self.assertEqual(tuple(image.shape), (50, 28, 28))
        self.assertTrue(in_ring(image), "the image tensor is not inside a mapped ring")
        self.assertTrue(in_ring(batch["label"]))
        # The synthetic images carry their sample id in their first four pixels.
        pixels = image[:, 0, :4].to(torch.int64)
        carried = pixels[:, 0] | pixels[:, 1] << 8 | pixels[:, 2] << 16 | pixels[:, 3] << 24
        self.assertEqual(carried.tolist(), ids_of(batch))
        self.assertEqual((batch.epoch, batch.step, batch.last), (0, 0, False))

    def test_numpy_and_dlpack_outputs_are_views_into_the_ring_too(self):
        arrays = next(iter(self.loader("numpy", output="numpy")))
        image = arrays["image"]
        self.assertIsInstance(image, numpy.ndarray)
        self.assertEqual((image.dtype, image.shape), (numpy.uint8, (50, 28, 28)))
        self.assertTrue(in_ring(image), "the array is not inside a mapped ring")
        pixels = image[:, 0, :4].astype(numpy.int64)
        carried = pixels[:, 0] | pixels[:, 1] << 8 | pixels[:, 2] << 16 | pixels[:, 3] << 24
        self.assertEqual(carried.tolist(), arrays["sample_id"].reshape(-1).tolist())
        raw = next(iter(self.loader("dlpack", output="dlpack")))
        self.assertEqual(raw["image"].__dlpack_device__(), (1, 0))  # kDLCPU
        self.assertEqual(raw["image"].shape, (50, 28, 28))
        self.assertTrue(in_ring(raw["image"]))
        # Any DLPack consumer takes it, without a copy.
        taken = torch.from_dlpack(raw["label"])
        self.assertEqual(taken.data_ptr(), raw["label"].data_ptr)
        with self.assertRaises(ember.InvalidArgument):
            self.loader("bad", output="jax")

    def test_a_path_is_registered_on_first_use_with_its_format_detected(self):
        data = self.daemon.dir + "/synth"  # add_synthetic's IDX files
        self.assertEqual(ember.detect_format(data), "idx")
        loader = ember.Loader(data, 50, epochs=1, rank=0, world_size=1, client=self.client,
                              job="by-path")
        self.assertTrue(loader.dataset.startswith("synth.train-"), loader.dataset)
        self.assertEqual(sum(1 for _ in loader), 20)
        again = ember.Loader(data + "/", 50, epochs=1, rank=0, world_size=1,
                             client=self.client, job="by-path-again")
        self.assertEqual(again.dataset, loader.dataset)  # the same registration
        self.assertEqual(len(again), 20)
        with self.assertRaises(ember.InvalidArgument):
            ember.Loader("synth", 50, split="test", client=self.client)
        with self.assertRaises(ember.NotFound):
            ember.Loader("/nonexistent/data", 50, client=self.client)
        # An S3 endpoint is for s3:// paths, and part of a path dataset's name only when set.
        with self.assertRaises(ember.InvalidArgument):
            ember.Loader("synth", 50, endpoint="http://127.0.0.1:7480", client=self.client)
        with self.assertRaisesRegex(ember.InvalidArgument, "endpoint is for s3:// paths"):
            len(ember.Loader(data, 50, epochs=1, rank=0, world_size=1, client=self.client,
                             job="by-path-endpoint", endpoint="http://127.0.0.1:7480"))
        from ember._loader import _PathDataset
        s3 = ("s3://data/train/", "webdataset", "train", "", "fail")
        self.assertEqual(_PathDataset(*s3).name, _PathDataset(*s3, "samples", "").name)
        self.assertNotEqual(_PathDataset(*s3).name,
                            _PathDataset(*s3, "samples", "http://127.0.0.1:7480").name)

    def test_a_numpy_array_kept_holds_its_slot_until_freed(self):
        loader = self.loader("numpy-slots", epochs=None, output="numpy")
        epoch = iter(loader)
        kept = next(epoch)["image"]  # the batch goes, its array stays
        expected = kept.copy()
        others = [next(epoch) for _ in range(3)]  # the 3 other slots
        with self.assertRaises(ember.FailedPrecondition):
            next(epoch)
        numpy.testing.assert_array_equal(kept, expected)  # never overwritten
        del kept
        gc.collect()
        del others[0]
        next(epoch)  # the freed slots came back
        next(epoch)

    def test_a_kept_batch_keeps_its_slot_and_release_frees_it(self):
        loader = self.loader("slots", epochs=None)
        epoch = iter(loader)
        kept = [next(epoch) for _ in range(4)]  # every slot of the ring
        with self.assertRaises(ember.FailedPrecondition) as raised:
            next(epoch)
        self.assertIn("ring slots are held", str(raised.exception))
        kept[0].release()
        self.assertEqual(len(kept[0]), 0)
        fifth = next(epoch)  # the released slot came back
        with self.assertRaises(ember.FailedPrecondition):
            next(epoch)
        del kept[1]  # dropping the last reference frees its slot too
        sixth = next(epoch)
        self.assertEqual(sixth.step, fifth.step + 1)
        with kept[1]:
            pass  # a with block releases
        next(epoch)

    def test_release_copies_a_kept_tensor_and_a_view_keeps_its_slot(self):
        loader = self.loader("release-view", epochs=None)
        epoch = iter(loader)
        batch = next(epoch)
        whole = batch["sample_id"]
        expected_ids = whole.clone()
        self.assertTrue(in_ring(whole))
        batch.release()
        self.assertFalse(in_ring(whole), "a tensor kept past release() still reads the ring")
        # The ring overwrites the slot with later batches; the kept tensor does not change.
        later = [next(epoch) for _ in range(4)]
        self.assertTrue(torch.equal(whole, expected_ids))
        del later
        # A view of a batch's tensor (a slice) keeps the batch's slot past release(): its
        # data stays as it was, and the slot comes back when the view goes.
        batch = next(epoch)
        view = batch["image"][:2]
        expected_view = view.clone()
        batch.release()
        others = [next(epoch) for _ in range(3)]
        with self.assertRaises(ember.FailedPrecondition):
            next(epoch)
        self.assertTrue(in_ring(view))
        self.assertTrue(torch.equal(view, expected_view))
        del view
        next(epoch)
        del others

    def run_ranks(self, job, world_size, state=None, **kwargs):
        """Each rank on its own thread; returns per rank a list of (epoch, step, ids)."""
        def rank_main(rank):
            loader = self.loader(job, rank=rank, world_size=world_size, **kwargs)
            if state is not None:
                loader.load_state_dict(state)
            seen = []
            for _ in range(kwargs.get("epochs", 1)):
                for batch in loader:
                    seen.append((batch.epoch, batch.step, ids_of(batch)))
            return seen, len(loader)

        return et.run_ranks(rank_main, world_size)

    def test_two_ranks_see_every_sample_once_per_epoch(self):
        results = self.run_ranks("exactly-once", 2, epochs=2)
        per_rank = [len(seen) for seen, _ in results]
        self.assertEqual(per_rank[0], per_rank[1])
        self.assertEqual(per_rank[0], 2 * results[0][1])  # len(loader) batches per epoch
        for epoch in range(2):
            ids = [i for seen, _ in results for (e, _, batch) in seen if e == epoch
                   for i in batch]
            self.assertEqual(sorted(ids), list(range(1000)), f"epoch {epoch}")
        # Same step on both ranks: slices of one global step.
        steps = [[s for (e, s, _) in seen if e == 0] for seen, _ in results]
        self.assertEqual(steps[0], steps[1])

    def test_state_dict_resumes_mid_epoch_on_another_world_size(self):
        first = self.loader("resume-a", epochs=1)
        epoch = iter(first)
        consumed = []
        for _ in range(7):
            consumed += ids_of(next(epoch))
        state = first.state_dict()
        self.assertEqual(set(state), {"fingerprint", "seed", "epoch", "position"})
        self.assertEqual((state["epoch"], state["position"]), (0, 350))
        self.assertNotEqual(state["fingerprint"], 0)
        round_trip = ember.LoaderState.parse(ember.LoaderState(**state).to_string())
        self.assertEqual(round_trip, ember.LoaderState(**state))
        first.close()

        results = self.run_ranks("resume-b", 2, state=state, batch_size=40)
        rest = [i for seen, _ in results for (e, _, batch) in seen if e == 0 for i in batch]
        self.assertEqual(sorted(consumed + rest), list(range(1000)))
        self.assertEqual(len(results[0][0]), len(results[1][0]))

    def test_epochs_over_and_misuse_are_clear_errors(self):
        loader = self.loader("over", epochs=1)
        self.assertEqual(sum(1 for _ in loader), len(loader))
        with self.assertRaises(ember.FailedPrecondition) as raised:
            iter(loader)
        self.assertIn("epochs of dataset 'synth' are over", str(raised.exception))
        with self.assertRaises(ember.FailedPrecondition):
            loader.load_state_dict({"fingerprint": 0, "seed": 0, "epoch": 0, "position": 0})
        finished = self.loader("finished", epochs=1)
        finished.load_state_dict(loader.state_dict())  # at the end of its only epoch
        with self.assertRaises(ember.FailedPrecondition):
            iter(finished)
        fresh = self.loader("misuse")
        with self.assertRaises(ember.InvalidArgument) as raised:
            fresh.load_state_dict({"seed": 0})
        self.assertIn("has no fingerprint, epoch, position", str(raised.exception))
        with self.assertRaises(ember.InvalidArgument):
            fresh.load_state_dict({"fingerprint": 0, "seed": 5, "epoch": 0, "position": 0})
        with self.assertRaises(ember.InvalidArgument):
            ember.Loader("synth", 0, client=self.client)

    def test_default_job_names_the_run(self):
        from ember._loader import default_run
        import os
        base = dict(job="", launcher="none", master_addr="")
        self.assertEqual(default_run(dict(base, job="run7", launcher="ember-run")), "run7")
        os.environ["MASTER_PORT"] = "29500"
        self.assertEqual(default_run(dict(base, launcher="torchrun", master_addr="10.0.0.1")),
                         "torchrun-10.0.0.1:29500")
        self.assertEqual(default_run(base), f"python-{os.getpid()}")
        self.assertEqual(self.loader(None).job, f"python-{os.getpid()}.synth")

    def test_stats_count_batches_and_stall(self):
        loader = self.loader("stats")
        n = sum(1 for _ in loader)
        stats = loader.stats()
        self.assertEqual(stats["batches"], n)
        self.assertGreaterEqual(stats["data_stall_seconds"], 0.0)
        self.assertEqual(stats["reconnects"], 0)

    def test_a_share_group_serves_its_jobs_the_same_rows(self):
        # 64x64 images: a row is a page, so the group shares the image tensor as a region.
        data = os.path.join(self.daemon.dir, "share-rows")
        os.makedirs(data)
        et.write_synthetic_idx(data, "train", 400, rows=64, cols=64)
        self.client.add_dataset("share-rows", data)
        loaders = [ember.Loader("share-rows", 20, epochs=1, rank=0, world_size=1, seed=5,
                                client=self.client, sample_ids=True, job=f"share-{k}",
                                share="g") for k in range(2)]
        self.assertEqual(loaders[0].share, "g")
        epochs = [iter(loader) for loader in loaders]
        batches = 0
        for a, b in zip(*epochs):
            self.assertEqual(ids_of(a), ids_of(b))
            self.assertTrue(torch.equal(a["image"], b["image"]))
            pixels = a["image"][:, 0, :4].to(torch.int64)
            carried = pixels[:, 0] | pixels[:, 1] << 8 | pixels[:, 2] << 16 | pixels[:, 3] << 24
            self.assertEqual(carried.tolist(), ids_of(a))
            if batches == 0:
                # The images lie in the group's memory, mapped read-only, not in the ring.
                address, size, _ = loaders[0]._native.ring
                image = a["image"].data_ptr()
                self.assertFalse(address <= image < address + size)
                self.assertEqual(mapping_permissions(image), "r--s")
                self.assertTrue(address <= a["label"].data_ptr() < address + size)
            batches += 1
            a.release()
            b.release()
        self.assertEqual(batches, len(loaders[0]))
        streams = [s for s in self.client.status().streams if s.job.startswith("share-")]
        self.assertEqual(sorted(s.share for s in streams), ["g", "g"])
        self.assertGreater(sum(s.shared_batches for s in streams), 0)
        with self.assertRaises(ember.InvalidArgument):
            ember.Loader("share-rows", 20, client=self.client, share=7)

    def test_a_job_that_joins_its_share_group_late_starts_at_the_next_epoch(self):
        data = os.path.join(self.daemon.dir, "share-late")
        os.makedirs(data)
        et.write_synthetic_idx(data, "train", 400, rows=64, cols=64)
        self.client.add_dataset("share-late", data)
        early = ember.Loader("share-late", 20, epochs=2, seed=5, client=self.client,
                             sample_ids=True, job="share-early", share="late")
        early_epochs = [iter(early)]
        seen_early = [ids_of(next(early_epochs[0])) for _ in range(12)]  # row 0 is gone
        late = ember.Loader("share-late", 20, epochs=1, seed=5, client=self.client,
                            sample_ids=True, job="share-late", share="late")
        self.assertEqual(len(late), 20)  # its stream opens now, while early is in epoch 0
        done = threading.Event()

        def read_early():
            for batch in early_epochs[0]:
                seen_early.append(ids_of(batch))
            for batch in early:
                seen_early.append(ids_of(batch))
            done.set()

        thread = threading.Thread(target=read_early)
        thread.start()
        late_ids, late_epochs = [], set()
        for batch in late:
            late_ids += ids_of(batch)
            late_epochs.add(batch.epoch)
        thread.join(60)
        self.assertTrue(done.is_set())
        # Its one epoch is the group's second, every sample once; its epochs count the group's.
        self.assertEqual(late_epochs, {1})
        self.assertEqual(sorted(late_ids), list(range(400)))
        self.assertEqual(late.epochs, 2)
        self.assertEqual(late.state_dict()["epoch"], 2)
        with self.assertRaises(ember.FailedPrecondition):
            iter(late)
        self.assertEqual(sorted(i for ids in seen_early for i in ids), sorted(list(range(400)) * 2))


if __name__ == "__main__":
    unittest.main()
