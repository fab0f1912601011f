#!/usr/bin/env python3
"""Writes the `ember` wheel (PEP 427) from the package's files: used by //sdk/python:wheel.

    make_wheel.py --out ember-0.1.0-cp311-cp311-linux_x86_64.whl --version 0.1.0 \
        --tag cp311-cp311-linux_x86_64 FILE...

Each FILE goes into the wheel under ember/ (its base name). Deterministic: fixed file
order and timestamps, so the same inputs give the same wheel.
"""

import argparse
import base64
import hashlib
import os
import zipfile

METADATA = """Metadata-Version: 2.1
Name: ember
Version: {version}
Summary: Data for PyTorch distributed training, served by emberd (Python SDK)
Requires-Python: >=3.9
Provides-Extra: torch
Requires-Dist: torch>=1.10; extra == "torch"
Provides-Extra: numpy
Requires-Dist: numpy>=1.22; extra == "numpy"
"""

WHEEL = """Wheel-Version: 1.0
Generator: ember make_wheel.py
Root-Is-Purelib: false
Tag: {tag}
"""


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()

    entries = []
    for path in sorted(args.files, key=os.path.basename):
        with open(path, "rb") as f:
            entries.append(("ember/" + os.path.basename(path), f.read()))
    dist_info = f"ember-{args.version}.dist-info"
    entries.append((f"{dist_info}/METADATA", METADATA.format(version=args.version).encode()))
    entries.append((f"{dist_info}/WHEEL", WHEEL.format(tag=args.tag).encode()))
    records = [record_line(name, data) for name, data in entries]
    records.append(f"{dist_info}/RECORD,,")
    entries.append((f"{dist_info}/RECORD", ("\n".join(records) + "\n").encode()))

    with zipfile.ZipFile(args.out, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)


if __name__ == "__main__":
    main()
