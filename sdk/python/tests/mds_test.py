"""Format "mds" against its reference writer: sets written by Mosaic Streaming's own
MDSWriter (image jpeg, label int, txt str and emb ndarray columns; pip's
mosaicml-streaming, in the venv tools/install-deps makes; its python is
$FORMAT_WRITERS_PYTHON, which tools/test passes) read back through a real emberd sample for
sample equal to what was written (the images equal to the same JPEGs registered as an
image folder), uncompressed and zstd-compressed with hashes, from a directory and over
HTTP through the daemon's shard cache; every sample once per epoch across 2 ranks; a
corrupt sample left out under on_error skip and failing the read under fail."""

import os
import subprocess
import tempfile
import unittest

import torch

import ember
import ember_testing as et

COUNT = 24
BAD = 5  # the sample whose image is corrupt in mds-bad/
PIPELINE = "steps: [{resize: {size: [16, 16]}}]\noutput: {layout: HWC}"

# Run by the writers' python: the same JPEGs as an image folder (class c<label>/, files in
# sample order) and as MDS sets of about 3 samples a shard: mds/ uncompressed, mds-zstd/
# zstd-compressed with sha1 and xxh64 hashes, mds-bad/ with sample BAD's image not a JPEG.
WRITER = r"""
import io, os, sys
import numpy
from PIL import Image
from streaming import MDSWriter
root, count, bad = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
columns = {"image": "jpeg", "label": "int", "txt": "str", "emb": "ndarray"}
samples = []
for i in range(count):
    image = Image.new("RGB", (40 + i, 30), (i * 10 % 256, 255 - i * 7 % 256, 90))
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90)
    label = i // 8
    folder = os.path.join(root, "folder", "c%d" % label)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "%04d.jpg" % i), "wb") as f:
        f.write(out.getvalue())
    samples.append({"image": out.getvalue(), "label": label, "txt": "a photo number %d" % i,
                    "emb": numpy.arange(4, dtype=numpy.float32) * i})
for name, options in (("mds", {}), ("mds-zstd", {"compression": "zstd", "hashes": ["sha1", "xxh64"]}),
                      ("mds-bad", {})):
    with MDSWriter(out=os.path.join(root, name), columns=columns, size_limit=4096, **options) as w:
        for i, sample in enumerate(samples):
            w.write(dict(sample, image=b"not a jpeg") if name == "mds-bad" and i == bad else sample)
"""


class MdsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = tempfile.mkdtemp(prefix="ember-mds-", dir=os.environ.get("TEST_TMPDIR"))
        subprocess.run([et.writers_python(), "-c", WRITER, cls.data, str(COUNT), str(BAD)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cls.daemon = et.Daemon(slots=4)
        cls.client = cls.daemon.client()
        cls.folder = cls.samples(os.path.join(cls.data, "folder"))

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    @classmethod
    def samples(cls, path, **kwargs):
        return et.read_samples(cls.client, path, PIPELINE, **kwargs)

    def check_sample(self, got, i):
        self.assertTrue(torch.equal(got["image"], self.folder[i]["image"]), f"image of {i}")
        self.assertEqual(int(got["label"]), i // 8)
        text = "a photo number %d" % i
        self.assertEqual(int(got["txt_size"]), len(text))
        self.assertEqual(bytes(got["txt"][:len(text)].tolist()).decode(), text)
        self.assertFalse(got["txt"][len(text):].any())
        self.assertTrue(torch.equal(got["emb"], torch.arange(4, dtype=torch.float32) * i))

    def test_sets_read_back_equal_to_what_mdswriter_wrote(self):
        for name in ("mds", "mds-zstd"):
            path = os.path.join(self.data, name)
            self.assertEqual(ember.detect_format(path), "mds")
            self.assertEqual(ember.detect_format(os.path.join(path, "index.json")), "mds")
            got = self.samples(path)
            self.assertEqual(sorted(got), list(range(COUNT)), name)
            for i in range(COUNT):
                self.check_sample(got[i], i)
            info = self.client.inspect_dataset(ember.Loader(path, 4, client=self.client,
                                                            pipeline=PIPELINE).dataset)
            self.assertEqual(info.format, "mds")
            self.assertEqual(info.count, COUNT)
            self.assertEqual([t.name for t in info.tensors],
                             ["image", "label", "emb", "txt", "txt_size"])
            self.assertEqual(info.files[0], os.path.join(os.path.realpath(path), "index.json"))
            self.assertGreater(len(info.files), 4)  # index.json and its shards

    def test_sets_over_http_come_through_the_daemons_shard_cache(self):
        with et.Nginx(self.data) as nginx:
            url = f"http://127.0.0.1:{nginx.port}"
            with self.assertRaisesRegex(ember.InvalidArgument, "give format="):
                ember.detect_format(f"{url}/mds/")
            self.assertEqual(ember.detect_format(f"{url}/mds/index.json"), "mds")
            got = {"mds": self.samples(f"{url}/mds", format="mds"),
                   "mds-zstd": self.samples(f"{url}/mds-zstd/index.json")}
        for name, samples in got.items():
            self.assertEqual(sorted(samples), list(range(COUNT)), name)
            for i in range(COUNT):
                self.check_sample(samples[i], i)
        # Both sets' shards were fetched into the cache to be checked and indexed.
        shards = sum(len([n for n in os.listdir(os.path.join(self.data, name))
                          if n.startswith("shard.")]) for name in ("mds", "mds-zstd"))
        cache = os.path.join(self.daemon.dir, "state", "shard-cache")
        self.assertEqual(len([n for n in os.listdir(cache) if n.endswith(".shard")]), shards)

    def test_two_ranks_see_every_sample_once_per_epoch(self):
        for name in ("mds", "mds-zstd"):
            path = os.path.join(self.data, name)

            def rank_main(rank):
                loader = ember.Loader(path, 4, epochs=2, rank=rank, world_size=2,
                                      job=f"{name}-2-ranks", client=self.daemon.client(),
                                      sample_ids=True, pipeline=PIPELINE, seed=3)
                return [(b.epoch, b["sample_id"].reshape(-1).tolist()) for _ in range(2)
                        for b in loader]

            results = et.run_ranks(rank_main, 2)
            for epoch in range(2):
                ids = [i for r in range(2) for e, batch in results[r] if e == epoch for i in batch]
                self.assertEqual(sorted(ids), list(range(COUNT)), f"{name}, epoch {epoch}")

    def test_a_corrupt_sample_is_skipped_or_fails_as_on_error_says(self):
        path = os.path.join(self.data, "mds-bad")
        got = self.samples(path, on_error="skip")
        self.assertEqual(sorted(got), [i for i in range(COUNT) if i != BAD])
        for i in got:
            self.check_sample(got[i], i)
        # (The stream's end message is cut at a fixed size: the path may leave no room for
        # the rest, "column 'image': ...".)
        with self.assertRaisesRegex(ember.DataLoss, r"mds-bad/shard\.\d+\.mds: sample \d+ \(byte \d+\)"):
            self.samples(path, on_error="fail")


if __name__ == "__main__":
    unittest.main()
