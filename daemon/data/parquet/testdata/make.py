"""Writes the Parquet files parquet_test reads, with pyarrow's own writer (run it with the
writers' python, tools/install-deps --writers-python: pyarrow 25.0.1):

  images/part-0.parquet  rows 0..5 in row groups of 2    image    Hugging Face's Image struct
  images/part-1.parquet  rows 6..9 in row groups of 3             {bytes: a 16x12 JPEG of color
                         (and the "huggingface" metadata          (20 * i, 100, 200), path}
                         Hugging Face writes)             label    int64 i % 3
                                                          caption  string "caption i" + i 'x's
                                                          input_ids list<int32> i, i+1, ..
                                                                   (i % 4 + 1 of them)
                                                          emb      fixed_size_list<float>[2]
                                                                   [i, 0.5]
                                                          shape    list<int16> [i, -i, 7]
  scalars.parquet        rows 0..3: flag bool i odd, small int8 -i, wide uint16 1000 + i,
                         u32 uint32 4e9 + i, big uint64 2^40 + i (row 3: 2^63 + 5), half
                         float16 i / 4, single float32 i + 0.5, double float64 i / 3
  lists.parquet          rows 0..3: label int32 i, var list<float16> [0.5] * i, blob
                         large_binary i 'b's
  nulls.parquet          rows 0..4: image binary (a JPEG; row 1 null), text string (row 2
                         null), input_ids list<int64> (row 3 null, row 4 [1, null]), value
                         int32
  damaged.parquet        rows 0..5 of images in row groups of 2, row group 1's emb chunk
                         overwritten (its footer intact); damaged-caption.parquet: its
                         caption chunk
  many.parquet           string columns a, b, c, d and int64 e (9 tensors)
  long.parquet           a string column "description"
  other.parquet          a timestamp column
  hf/                    Hugging Face's split files: train-00000-of-00002 (rows 0, 1),
                         train-00001-of-00002 (row 2), test-00000-of-00001 (row 100); label
  mixed/a.parquet, mixed/b.parquet   label int64, then label string"""

import io
import json
import os
import shutil
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image


def jpeg(i):
    out = io.BytesIO()
    Image.new("RGB", (16, 12), (20 * i, 100, 200)).save(out, format="JPEG", quality=95)
    return out.getvalue()


here = os.path.dirname(os.path.abspath(sys.argv[0]))
for name in ("images", "hf", "mixed"):
    shutil.rmtree(os.path.join(here, name), ignore_errors=True)
    os.makedirs(os.path.join(here, name))

image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
hf = {"info": {"features": {
    "image": {"_type": "Image"},
    "label": {"names": ["a", "b", "c"], "_type": "ClassLabel"},
    "caption": {"dtype": "string", "_type": "Value"},
    "input_ids": {"feature": {"dtype": "int32", "_type": "Value"}, "_type": "Sequence"},
    "emb": {"feature": {"dtype": "float32", "_type": "Value"}, "length": 2, "_type": "Sequence"},
    "shape": {"feature": {"dtype": "int16", "_type": "Value"}, "_type": "Sequence"}}}}
images = pa.schema([("image", image_type), ("label", pa.int64()), ("caption", pa.string()),
                    ("input_ids", pa.list_(pa.int32())), ("emb", pa.list_(pa.float32(), 2)),
                    ("shape", pa.list_(pa.int16()))],
                   metadata={"huggingface": json.dumps(hf)})


def images_table(rows):
    return pa.table({
        "image": [{"bytes": jpeg(i), "path": "%d.jpg" % i} for i in rows],
        "label": [i % 3 for i in rows],
        "caption": ["caption %d" % i + "x" * i for i in rows],
        "input_ids": [list(range(i, i + i % 4 + 1)) for i in rows],
        "emb": [[float(i), 0.5] for i in rows],
        "shape": [[i, -i, 7] for i in rows]}, schema=images)


pq.write_table(images_table(range(0, 6)), os.path.join(here, "images", "part-0.parquet"),
               row_group_size=2)
pq.write_table(images_table(range(6, 10)), os.path.join(here, "images", "part-1.parquet"),
               row_group_size=3)

rows = range(4)
pq.write_table(pa.table({
    "flag": pa.array([i % 2 == 1 for i in rows], pa.bool_()),
    "small": pa.array([-i for i in rows], pa.int8()),
    "wide": pa.array([1000 + i for i in rows], pa.uint16()),
    "u32": pa.array([4000000000 + i for i in rows], pa.uint32()),
    "big": pa.array([2**40 + i if i < 3 else 2**63 + 5 for i in rows], pa.uint64()),
    "half": pa.array([np.float16(i / 4) for i in rows], pa.float16()),
    "single": pa.array([i + 0.5 for i in rows], pa.float32()),
    "double": pa.array([i / 3 for i in rows], pa.float64())}),
    os.path.join(here, "scalars.parquet"))

pq.write_table(pa.table({
    "label": pa.array(list(rows), pa.int32()),
    "var": pa.array([[np.float16(0.5)] * i for i in rows], pa.list_(pa.float16())),
    "blob": pa.array([b"b" * i for i in rows], pa.large_binary())}),
    os.path.join(here, "lists.parquet"))

pq.write_table(pa.table({
    "image": pa.array([jpeg(i) if i != 1 else None for i in range(5)], pa.binary()),
    "text": pa.array(["text %d" % i if i != 2 else None for i in range(5)], pa.string()),
    "input_ids": pa.array([[i, i] if i == 0 else None if i == 3 else [1, None] if i == 4 else [i]
                           for i in range(5)], pa.list_(pa.int64())),
    "value": pa.array(list(range(5)), pa.int32())}),
    os.path.join(here, "nulls.parquet"))

pq.write_table(pa.table({"when": pa.array([0, 1], pa.timestamp("us"))}),
               os.path.join(here, "other.parquet"))

for name, labels in (("train-00000-of-00002", [0, 1]), ("train-00001-of-00002", [2]),
                     ("test-00000-of-00001", [100])):
    pq.write_table(pa.table({"label": pa.array(labels, pa.int64())}),
                   os.path.join(here, "hf", name + ".parquet"))

pq.write_table(pa.table({"label": pa.array([1], pa.int64())}),
               os.path.join(here, "mixed", "a.parquet"))
pq.write_table(pa.table({"label": pa.array(["1"], pa.string())}),
               os.path.join(here, "mixed", "b.parquet"))

# Row group 1's chunk of one column overwritten with 0xff from its first page on.
def damage(name, column):
    path = os.path.join(here, name)
    pq.write_table(images_table(range(0, 6)), path, row_group_size=2)
    group = pq.ParquetFile(path).metadata.row_group(1)
    chunk = [group.column(i) for i in range(group.num_columns)
             if group.column(i).path_in_schema.split(".")[0] == column][0]
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(b"\xff" * chunk.total_compressed_size)


damage("damaged.parquet", "emb")
damage("damaged-caption.parquet", "caption")

strings = {name: ["x"] for name in ("a", "b", "c", "d")}
pq.write_table(pa.table(dict(strings, e=pa.array([1], pa.int64()))),
               os.path.join(here, "many.parquet"))
pq.write_table(pa.table({"description": ["x"]}), os.path.join(here, "long.parquet"))
