"""Format "parquet" against its reference writer: a set written by pyarrow.parquet (pip's
pyarrow, in the venv tools/install-deps makes; its python is $FORMAT_WRITERS_PYTHON, which
tools/test passes) in 2 files of several row groups, with the columns Hugging Face datasets
writes (an Image struct {bytes, path}, a ClassLabel int64, a string, tokenized input_ids,
and its "huggingface" metadata), read back through a real emberd sample for sample equal to
what was written (the images equal to the same JPEGs registered as an image folder), from a
directory, a file and over HTTP through the daemon's shard cache; every sample once per
epoch across 2 ranks (also shuffled by shards); a corrupt image left out under on_error
skip and failing the read under fail; a null value and a file that is not Parquet failing
with the file, row and column named."""

import os
import subprocess
import tempfile
import unittest

import torch

import ember
import ember_testing as et

COUNT = 24
BAD = 5   # the row whose image is not a JPEG in corrupt/
NULL = 3  # the row whose text is null in nulls/
PIPELINE = "steps: [{resize: {size: [16, 16]}}]\noutput: {layout: HWC}"

# Run by the writers' python: the same JPEGs as an image folder (class c<label>/, files in
# sample order) and as a Parquet set: parquet/part-0.parquet (rows 0..13, row groups of 4)
# and part-1.parquet (rows 14..23, row groups of 5); corrupt/ the same with row BAD's image
# not a JPEG; nulls/ with row NULL's text null; broken.parquet not Parquet at all.
WRITER = r"""
import io, json, os, sys
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image
root, count, bad, null = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
features = {"image": {"_type": "Image"},
            "label": {"names": ["a", "b", "c"], "_type": "ClassLabel"},
            "text": {"dtype": "string", "_type": "Value"},
            "input_ids": {"feature": {"dtype": "int32", "_type": "Value"}, "_type": "Sequence"}}
schema = pa.schema([("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
                    ("label", pa.int64()), ("text", pa.string()),
                    ("input_ids", pa.list_(pa.int32()))],
                   metadata={"huggingface": json.dumps({"info": {"features": features}})})
rows = []
for i in range(count):
    image = Image.new("RGB", (40 + i, 30), (i * 10 % 256, 255 - i * 7 % 256, 90))
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90)
    label = i // 8
    folder = os.path.join(root, "folder", "c%d" % label)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "%04d.jpg" % i), "wb") as f:
        f.write(out.getvalue())
    rows.append({"image": {"bytes": out.getvalue(), "path": "%04d.jpg" % i}, "label": label,
                 "text": "a photo number %d" % i, "input_ids": list(range(100 + i, 100 + i + i % 5 + 1))})

def write(name, rows):
    os.makedirs(os.path.join(root, name), exist_ok=True)
    for part, (begin, end, group) in enumerate(((0, 14, 4), (14, count, 5))):
        table = pa.Table.from_pylist(rows[begin:end], schema=schema)
        pq.write_table(table, os.path.join(root, name, "part-%d.parquet" % part), row_group_size=group)

write("parquet", rows)
write("corrupt", [dict(r, image={"bytes": b"not a jpeg", "path": "x.jpg"}) if i == bad else r
                  for i, r in enumerate(rows)])
write("nulls", [dict(r, text=None) if i == null else r for i, r in enumerate(rows)])
with open(os.path.join(root, "broken.parquet"), "wb") as f:
    f.write(b"PAR1 this is not a parquet file PAR1")
"""


class ParquetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = tempfile.mkdtemp(prefix="ember-parquet-", dir=os.environ.get("TEST_TMPDIR"))
        subprocess.run([et.writers_python(), "-c", WRITER, cls.data, str(COUNT), str(BAD),
                        str(NULL)], check=True, stdout=subprocess.DEVNULL)
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
        self.assertEqual(int(got["text_size"]), len(text))
        self.assertEqual(bytes(got["text"][:len(text)].tolist()).decode(), text)
        self.assertFalse(got["text"][len(text):].any())
        ids = list(range(100 + i, 100 + i + i % 5 + 1))
        self.assertEqual(int(got["input_ids_size"]), len(ids))
        self.assertEqual(got["input_ids"].dtype, torch.int64)
        self.assertEqual(got["input_ids"][:len(ids)].tolist(), ids)
        self.assertFalse(got["input_ids"][len(ids):].any())

    def test_set_reads_back_equal_to_what_pyarrow_wrote(self):
        path = os.path.join(self.data, "parquet")
        self.assertEqual(ember.detect_format(path), "parquet")
        self.assertEqual(ember.detect_format(os.path.join(path, "part-0.parquet")), "parquet")
        self.assertEqual(ember.detect_format(os.path.join(path, "part-{0..1}.parquet")), "parquet")
        got = self.samples(path)
        self.assertEqual(sorted(got), list(range(COUNT)))
        for i in range(COUNT):
            self.check_sample(got[i], i)
        info = self.client.inspect_dataset(ember.Loader(path, 4, client=self.client,
                                                        pipeline=PIPELINE).dataset)
        self.assertEqual(info.format, "parquet")
        self.assertEqual(info.count, COUNT)
        self.assertEqual([t.name for t in info.tensors],
                         ["image", "label", "text", "text_size", "input_ids", "input_ids_size"])
        self.assertEqual(info.files, [os.path.join(os.path.realpath(path), "part-%d.parquet" % p)
                                      for p in (0, 1)])
        one = self.samples(os.path.join(path, "part-1.parquet"))
        self.assertEqual(sorted(one), list(range(COUNT - 14)))
        for i in (0, 9):
            self.check_sample(one[i], 14 + i)

    def test_set_over_http_comes_through_the_daemons_shard_cache(self):
        with et.Nginx(self.data) as nginx:
            url = f"http://127.0.0.1:{nginx.port}/parquet/part-{{0,1}}.parquet"
            self.assertEqual(ember.detect_format(url), "parquet")
            got = self.samples(url)
        self.assertEqual(sorted(got), list(range(COUNT)))
        for i in range(COUNT):
            self.check_sample(got[i], i)
        # Both files were fetched into the cache to be read and scanned.
        cache = os.path.join(self.daemon.dir, "state", "shard-cache")
        self.assertEqual(len([n for n in os.listdir(cache) if n.endswith(".shard")]), 2)

    def test_two_ranks_see_every_sample_once_per_epoch(self):
        path = os.path.join(self.data, "parquet")
        for shuffle in (True, "shards"):
            def rank_main(rank):
                loader = ember.Loader(path, 4, epochs=2, rank=rank, world_size=2,
                                      job=f"parquet-2-ranks-{shuffle}", client=self.daemon.client(),
                                      sample_ids=True, pipeline=PIPELINE, seed=3, shuffle=shuffle)
                return [(b.epoch, b["sample_id"].reshape(-1).tolist()) for _ in range(2)
                        for b in loader]

            results = et.run_ranks(rank_main, 2)
            for epoch in range(2):
                ids = [i for r in range(2) for e, batch in results[r] if e == epoch for i in batch]
                self.assertEqual(sorted(ids), list(range(COUNT)), f"{shuffle}, epoch {epoch}")

    def test_a_corrupt_image_is_skipped_or_fails_as_on_error_says(self):
        path = os.path.join(self.data, "corrupt")
        got = self.samples(path, on_error="skip")
        self.assertEqual(sorted(got), [i for i in range(COUNT) if i != BAD])
        for i in got:
            self.check_sample(got[i], i)
        with self.assertRaisesRegex(ember.DataLoss, r"corrupt/part-0\.parquet: row %d " % BAD):
            self.samples(path, on_error="fail")

    def test_a_null_value_and_a_file_that_is_not_parquet_say_where(self):
        path = os.path.join(self.data, "nulls")
        got = self.samples(path, on_error="skip")
        self.assertEqual(sorted(got), [i for i in range(COUNT) if i != NULL])
        # (The stream's end message is cut at a fixed size: the path may leave no room for
        # the rest, "(row group 0) column 'text': null".)
        with self.assertRaisesRegex(ember.DataLoss, r"nulls/part-0\.parquet: row %d" % NULL):
            self.samples(path, on_error="fail")
        broken = os.path.join(self.data, "broken.parquet")
        with self.assertRaisesRegex(ember.DataLoss, r"broken\.parquet: not a Parquet file, or a "
                                                    r"damaged one: "):
            self.client.add_dataset("broken", broken, format="parquet")


if __name__ == "__main__":
    unittest.main()
