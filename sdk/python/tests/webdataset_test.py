"""Format "webdataset" against its reference writer: shards written by webdataset's own
ShardWriter (jpg, cls, txt and an .npy array per sample; pip's webdataset, in the venv tools/install-deps makes; its python is
$FORMAT_WRITERS_PYTHON, which tools/test passes) read back through a real emberd sample
for sample equal to the same images registered as an image folder, by path and by brace
pattern, and every sample once per epoch across 2 ranks."""

import os
import subprocess
import tempfile
import unittest

import torch

import ceph_s3
import ember
import ember_testing as et

COUNT = 24
PIPELINE = "steps: [{resize: {size: [16, 16]}}]\noutput: {layout: HWC}"

# Run by the writers' python: the same JPEGs as an image folder (class c<label>/, files in
# sample order) and as WebDataset shards of 10 samples (KEY.jpg, KEY.cls, KEY.txt).
WRITER = r"""
import io, os, sys
import numpy
from PIL import Image
import webdataset as wds
root, count = sys.argv[1], int(sys.argv[2])
os.makedirs(os.path.join(root, "shards"))
with wds.ShardWriter(os.path.join(root, "shards", "part-%06d.tar"), maxcount=10) as sink:
    for i in range(count):
        image = Image.new("RGB", (40 + i, 30), (i * 10 % 256, 255 - i * 7 % 256, 90))
        out = io.BytesIO()
        image.save(out, format="JPEG", quality=90)
        label = i // 8
        folder = os.path.join(root, "folder", "c%d" % label)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "%04d.jpg" % i), "wb") as f:
            f.write(out.getvalue())
        sink.write({"__key__": "sample%04d" % i, "jpg": out.getvalue(), "cls": label,
                    "txt": "a photo number %d" % i,
                    "emb.npy": numpy.arange(4, dtype=numpy.float32) * i})
"""


class WebDatasetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = tempfile.mkdtemp(prefix="ember-wds-", dir=os.environ.get("TEST_TMPDIR"))
        subprocess.run([et.writers_python(), "-c", WRITER, cls.data, str(COUNT)], check=True,
                       stdout=subprocess.DEVNULL)
        cls.daemon = et.Daemon(slots=4)
        cls.client = cls.daemon.client()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def samples(self, path, client=None, **kwargs):
        return et.read_samples(client or self.client, path, PIPELINE, **kwargs)

    def test_shards_read_back_equal_to_the_same_images_as_a_folder(self):
        shards = os.path.join(self.data, "shards")
        self.assertEqual(ember.detect_format(shards), "webdataset")
        pattern = os.path.join(shards, "part-{000000..000002}.tar")
        self.assertEqual(ember.detect_format(pattern), "webdataset")
        folder = self.samples(os.path.join(self.data, "folder"))
        for path in (shards, pattern):
            got = self.samples(path)
            self.assertEqual(sorted(got), list(range(COUNT)))
            for i in range(COUNT):
                self.assertTrue(torch.equal(got[i]["image"], folder[i]["image"]), f"sample {i}")
                self.assertEqual(int(got[i]["label"]), i // 8)
                text = "a photo number %d" % i
                self.assertEqual(int(got[i]["txt_size"]), len(text))
                self.assertEqual(bytes(got[i]["txt"][:len(text)].tolist()).decode(), text)
                self.assertTrue(torch.equal(got[i]["emb"], torch.arange(4, dtype=torch.float32) * i))
        info = self.client.inspect_dataset(ember.Loader(pattern, 4, client=self.client,
                                                        pipeline=PIPELINE).dataset)
        self.assertEqual(info.format, "webdataset")
        self.assertEqual(info.count, COUNT)

    def test_shards_over_http_come_through_the_daemons_shard_cache(self):
        with et.Nginx(self.data) as nginx:
            url = f"http://127.0.0.1:{nginx.port}/shards/part-{{000000..000002}}.tar"
            self.assertEqual(ember.detect_format(url), "webdataset")
            with self.assertRaisesRegex(ember.InvalidArgument, "give format="):
                ember.detect_format(f"http://127.0.0.1:{nginx.port}/shards/")
            got = self.samples(url)
            local = self.samples(os.path.join(self.data, "shards"))
        self.assertEqual(sorted(got), list(range(COUNT)))
        for i in range(COUNT):
            for name in ("image", "label", "txt", "emb"):
                self.assertTrue(torch.equal(got[i][name], local[i][name]), f"{name} of {i}")
        cache = os.path.join(self.daemon.dir, "state", "shard-cache")
        self.assertEqual(len([n for n in os.listdir(cache) if n.endswith(".shard")]), 3)

    def test_shards_over_s3_come_with_the_daemons_credentials_which_it_never_shows(self):
        token = "ember-test-session-token"  # radosgw without STS ignores it; emberd sends it
        with ceph_s3.CephS3(self.data) as s3:
            s3.put("wds", os.path.join(self.data, "shards"), "shards")
            env = dict(s3.env(), AWS_SESSION_TOKEN=token, AWS_CONFIG_FILE="/nonexistent",
                       AWS_SHARED_CREDENTIALS_FILE="/nonexistent")
            with et.Daemon(slots=4, env=env) as daemon:
                client = daemon.client()
                pattern = "s3://wds/shards/part-{000000..000002}.tar"
                self.assertEqual(ember.detect_format(pattern), "webdataset")
                self.assertEqual(ember.detect_format("s3://wds/shards/part-000000.tar"),
                                 "webdataset")
                with self.assertRaisesRegex(ember.InvalidArgument, "give format="):
                    ember.detect_format("s3://wds/shards/")
                by_pattern = self.samples(pattern, client=client)
                by_prefix = self.samples("s3://wds/shards/", client=client, format="webdataset")
                info = client.inspect_dataset(ember.Loader("s3://wds/shards/", 4, client=client,
                                                           format="webdataset",
                                                           pipeline=PIPELINE).dataset)
                with self.assertRaises(ember.NotFound) as missing:
                    client.add_dataset("missing", "s3://wds/shards/part-{000000..000003}.tar",
                                       format="webdataset", pipeline=PIPELINE)
                log = daemon.log()
                with open(os.path.join(daemon.dir, "state", "catalog.yaml")) as f:
                    catalog = f.read()
        local = self.samples(os.path.join(self.data, "shards"))
        for got in (by_pattern, by_prefix):
            self.assertEqual(sorted(got), list(range(COUNT)))
            for i in range(COUNT):
                for name in ("image", "label", "txt", "emb"):
                    self.assertTrue(torch.equal(got[i][name], local[i][name]), f"{name} of {i}")
        self.assertEqual(info.path, "s3://wds/shards/")
        self.assertEqual(info.files, [f"s3+{s3.endpoint}/wds/shards/part-00000{i}.tar"
                                      for i in range(3)])
        self.assertIn("bucket 'wds' has no key 'shards/part-000003.tar'", str(missing.exception))
        self.assertIn(f"S3: endpoint {s3.endpoint} (from AWS_ENDPOINT_URL_S3)", log)
        # Neither the secret nor the token is in an answer, the catalog or the log.
        self.assertIn("s3://wds/shards/", catalog)
        for text in (str(missing.exception), repr(info), log, catalog):
            self.assertNotIn(s3.secret_key, text)
            self.assertNotIn(token, text)

    def test_two_ranks_see_every_sample_once_per_epoch(self):
        shards = os.path.join(self.data, "shards")
        def rank_main(rank):
            loader = ember.Loader(shards, 4, epochs=2, rank=rank, world_size=2,
                                  job="wds-2-ranks", client=self.daemon.client(),
                                  sample_ids=True, pipeline=PIPELINE, seed=3)
            return [(b.epoch, b["sample_id"].reshape(-1).tolist()) for _ in range(2)
                    for b in loader]

        results = et.run_ranks(rank_main, 2)
        for epoch in range(2):
            ids = [i for r in range(2) for e, batch in results[r] if e == epoch for i in batch]
            self.assertEqual(sorted(ids), list(range(COUNT)), f"epoch {epoch}")

    def test_shuffled_by_shards_over_http_every_sample_once_a_shard_at_a_time(self):
        with et.Nginx(self.data) as nginx:
            url = f"http://127.0.0.1:{nginx.port}/shards/part-{{000000..000002}}.tar"
            name = "wds-by-shards"
            info = self.client.add_dataset(name, url, format="webdataset", pipeline=PIPELINE,
                                           shuffle="shards", shuffle_window=1)
            self.assertEqual(info.count, COUNT)

            def rank_main(rank):
                loader = ember.Loader(name, 4, epochs=2, rank=rank, world_size=2,
                                      job="wds-by-shards", client=self.daemon.client(),
                                      sample_ids=True, seed=5)
                return [(b.epoch, b.step, b["sample_id"].reshape(-1).tolist())
                        for _ in range(2) for b in loader]

            results = et.run_ranks(rank_main, 2)
        orders = []
        for epoch in range(2):
            steps = {}
            for r in range(2):
                for e, index, batch in results[r]:
                    if e == epoch:
                        steps.setdefault(index, []).extend(batch)
            ids = [i for index in sorted(steps) for i in steps[index]]
            self.assertEqual(sorted(ids), list(range(COUNT)), f"epoch {epoch}")
            # Shards of 10, 10 and 4 samples, one at a time: a step's 8 samples come from
            # one shard, or from the two the step straddles.
            for index, step in steps.items():
                self.assertLessEqual(len({i // 10 for i in step}), 2, f"step {index}: {step}")
            orders.append([steps[i] for i in sorted(steps)])
        self.assertNotEqual(orders[0], orders[1])  # another permutation each epoch
        with self.assertRaisesRegex(ember.InvalidArgument, "shuffle: shards needs a format"):
            self.client.add_dataset("folder-by-shards", os.path.join(self.data, "folder"),
                                    format="imagefolder", shuffle="shards")
        with self.assertRaisesRegex(ember.InvalidArgument, "shuffle_window: 0"):
            self.client.add_dataset("bad-window", url, format="webdataset", shuffle="shards",
                                    shuffle_window=0)

    def test_a_killed_daemon_starts_again_with_its_shard_cache(self):
        with et.Nginx(self.data) as nginx:
            url = f"http://127.0.0.1:{nginx.port}/shards/part-{{000000..000002}}.tar"
            first = et.Daemon(slots=4)
            second = None
            try:
                first.client().add_dataset("wds-kill", url, format="webdataset",
                                           pipeline=PIPELINE)
                def epoch(daemon):
                    loader = ember.Loader("wds-kill", 4, epochs=1, rank=0, world_size=1,
                                          client=daemon.client(), shuffle=False,
                                          sample_ids=True, job="wds-kill")
                    return {i: b["image"][k].clone() for b in loader
                            for k, i in enumerate(b["sample_id"].reshape(-1).tolist())}
                before = epoch(first)
                cache = os.path.join(first.dir, "state", "shard-cache")
                def entries():
                    return {n: os.stat(os.path.join(cache, n)).st_mtime_ns
                            for n in os.listdir(cache) if n.endswith(".shard")}
                cached = entries()
                self.assertEqual(len(cached), 3)
                first.process.kill()  # SIGKILL: no shutdown
                first.process.wait()
                second = et.Daemon(slots=4, directory=first.dir)
                after = epoch(second)
                self.assertEqual(sorted(after), list(range(COUNT)))
                for i in range(COUNT):
                    self.assertTrue(torch.equal(after[i], before[i]), f"sample {i}")
                self.assertEqual(entries(), cached)  # kept, checked, not fetched again
                details = second.client().describe_dataset("wds-kill")
                self.assertTrue(details.remote)
                self.assertEqual((details.shards, details.shards_cached), (3, 3))
                self.assertEqual(details.source, url)
                self.assertGreater(details.index_bytes, 0)
                cache_status = second.client().shard_cache()
                self.assertEqual(cache_status.entries, 3)
                self.assertEqual(len(cache_status.listed), 3)
                self.assertTrue(all(e.dataset == "wds-kill" for e in cache_status.listed))
                cleared = second.client().clear_shard_cache()  # this test runs as emberd's user
                self.assertEqual(cleared.entries, 3)
                self.assertEqual(second.client().describe_dataset("wds-kill").shards_cached, 0)
                with self.assertRaises(ember.NotFound):
                    second.client().registration_progress("wds-kill")
            finally:
                if second is not None:
                    second.stop()
                else:
                    first.stop()


if __name__ == "__main__":
    unittest.main()
