#!/usr/bin/env python3
"""Builds the `ember` wheel (bazel build //sdk/python:wheel): the Python package, its
extension module and the native programs (emberd, emberctl, ember-run, run through
console commands), self-contained in the manner of auditwheel: every shared library they
need beyond glibc, libstdc++ and libgcc_s is copied into ember/.libs, and each ELF file's
RUNPATH (patchelf) points there, so that the wheel installs and runs wherever its glibc
tag allows, with or without Debian's packages.

  make_wheel.py --out W --version V --tag T --module _ember.so --program emberd ... PY...
"""

import argparse
import base64
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zipfile

# What every manylinux system provides: glibc's libraries, libstdc++ and libgcc_s.
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
               "libutil.so.1", "libresolv.so.2", "ld-linux-x86-64.so.2", "libstdc++.so.6",
               "libgcc_s.so.1"}

METADATA = """Metadata-Version: 2.1
Name: ember
Version: {version}
Summary: Data for PyTorch distributed training, served by emberd (Python SDK and daemon)
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

ENTRY_POINTS = """[console_scripts]
emberd = ember._commands:emberd
emberctl = ember._commands:emberctl
ember-run = ember._commands:ember_run
"""


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def resolved_libraries(path):
    """soname -> file of every library `path` loads (ldd: the whole closure)."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    libs = {}
    for line in out.splitlines():
        match = re.match(r"\s*(\S+) => (/\S+)", line)
        if match:
            libs[match.group(1)] = match.group(2)
        elif "not found" in line:
            raise SystemExit(f"make_wheel: {path}: {line.strip()}")
    return libs


def set_runpath(path, runpath):
    subprocess.run(["patchelf", "--set-rpath", runpath, path], check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--module", required=True, help="the extension module (_ember.so)")
    parser.add_argument("--program", action="append", default=[], help="a native program")
    parser.add_argument("files", nargs="+", help="the package's other files")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as stage:
        package = os.path.join(stage, "ember")
        os.makedirs(os.path.join(package, "bin"))
        os.makedirs(os.path.join(package, ".libs"))
        elves = {}  # staged ELF file -> its RUNPATH
        module = os.path.join(package, os.path.basename(args.module))
        shutil.copy(args.module, module)
        elves[module] = "$ORIGIN/.libs"
        for program in args.program:
            staged = os.path.join(package, "bin", os.path.basename(program))
            shutil.copy(program, staged)
            elves[staged] = "$ORIGIN/../.libs"
        for path in args.files:
            shutil.copy(path, os.path.join(package, os.path.basename(path)))
        bundled = {}
        for elf in list(elves):
            for soname, found in resolved_libraries(elf).items():
                if soname not in SYSTEM_LIBS and soname not in bundled:
                    bundled[soname] = found
        for soname, found in sorted(bundled.items()):
            staged = os.path.join(package, ".libs", soname)
            shutil.copyfile(found, staged)
            os.chmod(staged, 0o755)
            elves[staged] = "$ORIGIN"
        for elf, runpath in elves.items():
            os.chmod(elf, 0o755)
            set_runpath(elf, runpath)

        entries = []
        for root, _, names in os.walk(package):
            for name in names:
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    entries.append((os.path.relpath(path, stage), f.read(), path in elves))
        entries.sort()
    dist_info = f"ember-{args.version}.dist-info"
    entries.append((f"{dist_info}/METADATA", METADATA.format(version=args.version).encode(),
                    False))
    entries.append((f"{dist_info}/WHEEL", WHEEL.format(tag=args.tag).encode(), False))
    entries.append((f"{dist_info}/entry_points.txt", ENTRY_POINTS.encode(), False))
    records = [record_line(name, data) for name, data, _ in entries]
    records.append(f"{dist_info}/RECORD,,")
    entries.append((f"{dist_info}/RECORD", ("\n".join(records) + "\n").encode(), False))

    with zipfile.ZipFile(args.out, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data, executable in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100755 if executable else 0o100644) << 16  # S_IFREG: pip
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)


if __name__ == "__main__":
    main()
