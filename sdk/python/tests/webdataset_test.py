"""Format "webdataset" against its reference writer: shards written by webdataset's own
ShardWriter (jpg, cls, txt and an .npy array per sample; pip's webdataset, in the venv tools/install-deps makes; its python is
$FORMAT_WRITERS_PYTHON, which tools/test passes) read back through a real emberd sample
for sample equal to the same images registered as an image folder, by path and by brace
pattern, and every sample once per epoch across 2 ranks."""

import os
import socket
import subprocess
import tempfile
import unittest

import torch

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


class Nginx:
    """Debian's nginx serving `root` on a free loopback port (a real HTTP server with byte
    ranges), its files in a temporary directory; stopped by the with block."""

    def __init__(self, root: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="nginx-", dir=os.environ.get("TEST_TMPDIR"))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        user = "user root root;\n" if os.geteuid() == 0 else ""
        temp = "".join(f"  {k}_temp_path {self.dir}/{k};\n"
                       for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"{user}daemon off;\nmaster_process off;\npid {self.dir}/nginx.pid;\n"
                    f"error_log {self.dir}/error.log warn;\nevents {{}}\n"
                    f"http {{\n  access_log off;\n{temp}"
                    f"  server {{ listen 127.0.0.1:{self.port}; root {root}; }}\n}}\n")
        self.process = subprocess.Popen(["/usr/sbin/nginx", "-q", "-e", f"{self.dir}/error.log",
                                         "-p", self.dir, "-c", conf])
        if not et.eventually(self._answers, timeout=10):
            self.__exit__()
            raise RuntimeError(f"nginx did not answer on port {self.port}: {self.dir}/error.log")

    def _answers(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def __enter__(self) -> "Nginx":
        return self

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def writers_python() -> str:
    python = os.environ.get("FORMAT_WRITERS_PYTHON", "")
    if not python or not os.access(python, os.X_OK):
        raise RuntimeError("FORMAT_WRITERS_PYTHON is unset or not a program: run ./tools/test "
                           "(tools/install-deps installs webdataset's reference writer)")
    return python


class WebDatasetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = tempfile.mkdtemp(prefix="ember-wds-", dir=os.environ.get("TEST_TMPDIR"))
        subprocess.run([writers_python(), "-c", WRITER, cls.data, str(COUNT)], check=True,
                       stdout=subprocess.DEVNULL)
        cls.daemon = et.Daemon(slots=4)
        cls.client = cls.daemon.client()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def samples(self, path, **kwargs):
        loader = ember.Loader(path, 4, epochs=1, rank=0, world_size=1, client=self.client,
                              shuffle=False, sample_ids=True, pipeline=PIPELINE, **kwargs)
        out = {}
        for batch in loader:
            for k, i in enumerate(batch["sample_id"].reshape(-1).tolist()):
                out[i] = {name: tensor[k].clone() for name, tensor in batch.items()}
        return out

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
        with Nginx(self.data) as nginx:
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
        with Nginx(self.data) as nginx:
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


if __name__ == "__main__":
    unittest.main()
