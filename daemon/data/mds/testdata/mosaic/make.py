"""Writes the MDS sets mds_test reads, with Mosaic's own MDSWriter (run it with the writers'
python, tools/install-deps --writers-python: mosaicml-streaming 0.13.0). Five samples of
  image  jpeg     a solid 20x10 image of color (40 * i, 100, 200)
  label  int      i % 3
  txt    str      "text i" and i 'x's
  emb    ndarray  int16 [i + 1, 2 * i + 1, -i]
  e2     ndarray:float32:2   [i, 0.5]
  big    uint64   2^40 + i
  half   float16  i / 4
in two shards (size_limit), into raw/ uncompressed and into zstd/ compressed with zstd:7
and hashed with sha1 and xxh64."""

import io
import os
import shutil
import sys

import numpy as np
from PIL import Image
from streaming import MDSWriter

COLUMNS = {"image": "jpeg", "label": "int", "txt": "str", "emb": "ndarray",
           "e2": "ndarray:float32:2", "big": "uint64", "half": "float16"}


def sample(i):
    jpeg = io.BytesIO()
    Image.new("RGB", (20, 10), (40 * i, 100, 200)).save(jpeg, format="JPEG", quality=95)
    return {"image": jpeg.getvalue(), "label": i % 3, "txt": "text %d" % i + "x" * i,
            "emb": np.array([i + 1, 2 * i + 1, -i], np.int16),
            "e2": np.array([i, 0.5], np.float32), "big": np.uint64(2**40 + i),
            "half": np.float16(i / 4)}


def write(out, **options):
    shutil.rmtree(out, ignore_errors=True)
    with MDSWriter(out=out, columns=COLUMNS, size_limit=2500, **options) as writer:
        for i in range(5):
            writer.write(sample(i))


here = os.path.dirname(os.path.abspath(sys.argv[0]))
write(os.path.join(here, "raw"))
write(os.path.join(here, "zstd"), compression="zstd:7", hashes=["sha1", "xxh64"])
