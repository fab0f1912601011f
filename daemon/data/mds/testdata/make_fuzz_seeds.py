"""Writes the seeds of mds_fuzz (testdata/fuzz/mds_fuzz/) with Mosaic's own MDSWriter (run
it with the writers' python, tools/install-deps --writers-python): each a little-endian
uint32 length, index.json, then the bytes of its one shard, as mds_fuzz.cc reads them."""

import io
import os
import struct
import sys
import tempfile

import numpy as np
from PIL import Image
from streaming import MDSWriter

OUT = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "fuzz", "mds_fuzz")


def seed(name, columns, samples, **options):
    with tempfile.TemporaryDirectory() as d:
        with MDSWriter(out=d, columns=columns, size_limit=None, **options) as writer:
            for sample in samples:
                writer.write(sample)
        with open(os.path.join(d, "index.json"), "rb") as f:
            index = f.read()
        shard = [n for n in os.listdir(d) if n.startswith("shard.")][0]
        with open(os.path.join(d, shard), "rb") as f:
            data = f.read()
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(struct.pack("<I", len(index)) + index + data)


def jpeg(i):
    out = io.BytesIO()
    Image.new("RGB", (6, 4), (i * 60, 10, 90)).save(out, format="JPEG", quality=50)
    return out.getvalue()


common = {"image": "jpeg", "label": "int", "txt": "str", "emb": "ndarray"}
samples = [{"image": jpeg(i), "label": i, "txt": "t%d" % i,
            "emb": np.arange(i + 1, dtype=np.int16)} for i in range(3)]
seed("jpeg_int_str_ndarray", common, samples)
seed("zstd_hashes", common, samples, compression="zstd", hashes=["sha1", "xxh64"])
scalars = {"label": "str_int", "score": "str_float", "big": "uint64", "half": "float16",
           "vec": "ndarray:float32:2", "raw": "bytes", "u": "uint32"}
seed("scalars", scalars, [{"label": i, "score": i / 3, "big": np.uint64(i), "half": np.float16(i),
                           "vec": np.array([i, 1], np.float32), "raw": b"x" * i,
                           "u": np.uint32(i)} for i in range(3)])
