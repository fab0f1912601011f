"""The wheel of //sdk/python:wheel installs into a fresh venv (with the system's site
packages, for Debian's torch) and `import ember` there talks to a real emberd; and into
a venv without them, with numpy only (no torch), where batches come as numpy arrays. It is
self-contained: every ELF file in it needs only glibc, libstdc++, libgcc_s and what it
bundles, no newer glibc than its tag says, and its console commands and the private
daemon it starts run from what it carries."""

import glob
import importlib.util
import os
import re
import subprocess
import tempfile
import unittest
import zipfile

import ember_testing as et


# What the wheel may leave to the system: make_wheel.py's own list.
_SPEC = importlib.util.spec_from_file_location("make_wheel", et.runfile("sdk/python/make_wheel.py"))
_MAKE_WHEEL = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MAKE_WHEEL)
SYSTEM_LIBS = _MAKE_WHEEL.SYSTEM_LIBS

ENV = dict(os.environ, PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
           PYTHONPATH="", PYTHONNOUSERSITE="1")


class WheelTest(unittest.TestCase):
    def venv_with_wheel(self, tmp, *venv_flags):
        """A fresh venv in `tmp` with the wheel installed: its python."""
        wheels = glob.glob(et.runfile("sdk/python/ember-*.whl"))
        self.assertEqual(len(wheels), 1, wheels)
        venv = os.path.join(tmp, "venv")
        subprocess.run([et.python(), "-m", "venv", *venv_flags, venv], check=True)
        python = os.path.join(venv, "bin", "python")
        install = subprocess.run([python, "-m", "pip", "install", "--no-index", wheels[0]],
                                 env=ENV, capture_output=True, text=True)
        self.assertEqual(install.returncode, 0, install.stdout + install.stderr)
        return python

    def test_wheel_installs_into_a_fresh_venv(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp, \
                et.Daemon() as daemon:
            python = self.venv_with_wheel(tmp, "--system-site-packages")
            venv = os.path.dirname(os.path.dirname(python))
            env = ENV
            check = subprocess.run(
                [python, "-c",
                 "import ember, sys; c = ember.Client(sys.argv[1]); "
                 "print(ember.__file__); print(c.status().pid)", daemon.socket],
                env=env, capture_output=True, text=True, cwd=tmp)
            self.assertEqual(check.returncode, 0, check.stderr)
            where, pid = check.stdout.split()
            self.assertTrue(where.startswith(venv), where)
            self.assertEqual(int(pid), daemon.pid)


    def test_without_torch_batches_are_numpy_arrays(self):
        import numpy
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp, \
                et.Daemon() as daemon:
            daemon.add_synthetic("synth", 100)
            python = self.venv_with_wheel(tmp)
            env = ENV
            # numpy, and nothing else of the system's: Debian's, linked into the venv.
            site = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"],
                                  env=env, capture_output=True, text=True, check=True).stdout.strip()
            os.symlink(os.path.dirname(numpy.__file__), os.path.join(site, "numpy"))
            script = (
                "import sys, ember, numpy\n"
                "loader = ember.Loader('synth', 25, epochs=1, rank=0, world_size=1, job='np',\n"
                "                      client=ember.Client(sys.argv[1]))\n"
                "shapes = [(type(b['image']).__name__, b['image'].shape) for b in loader]\n"
                "print(loader.output, len(shapes), shapes[0], 'torch' in sys.modules)\n")
            check = subprocess.run([python, "-c", script, daemon.socket], env=env,
                                   capture_output=True, text=True, cwd=tmp)
            self.assertEqual(check.returncode, 0, check.stderr)
            self.assertEqual(check.stdout.strip(), "numpy 4 ('ndarray', (25, 28, 28)) False")


    def test_every_elf_needs_only_glibc_libstdcxx_and_what_the_wheel_bundles(self):
        wheel = glob.glob(et.runfile("sdk/python/ember-*.whl"))[0]
        tag = re.search(r"manylinux_(\d+)_(\d+)_", os.path.basename(wheel))
        self.assertIsNotNone(tag, f"{wheel} has no manylinux tag")
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
            zipfile.ZipFile(wheel).extractall(tmp)
            elves = []
            for root, _, names in os.walk(tmp):
                for name in names:
                    path = os.path.join(root, name)
                    with open(path, "rb") as f:
                        if f.read(4) == b"\x7fELF":
                            elves.append(path)
            bundled = set(os.listdir(os.path.join(tmp, "ember", ".libs")))
            self.assertIn("libcapnp-0.9.2.so", bundled)
            names = {os.path.relpath(e, tmp) for e in elves}
            for program in ("ember/_ember.so", "ember/bin/emberd", "ember/bin/emberctl",
                            "ember/bin/ember-run"):
                self.assertIn(program, names)
            newest = (0, 0)
            for elf in elves:
                dynamic = subprocess.run(["readelf", "-dW", elf], capture_output=True,
                                         text=True, check=True).stdout
                needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic))
                outside = needed - SYSTEM_LIBS - bundled
                self.assertEqual(outside, set(), f"{os.path.relpath(elf, tmp)} needs {outside}")
                versions = subprocess.run(["readelf", "-VW", elf], capture_output=True,
                                          text=True, check=True).stdout
                for major, minor in re.findall(r"GLIBC_(\d+)\.(\d+)", versions):
                    newest = max(newest, (int(major), int(minor)))
            self.assertLessEqual(newest, (int(tag.group(1)), int(tag.group(2))))

    def test_console_commands_and_the_private_daemon_come_from_the_wheel(self):
        with tempfile.TemporaryDirectory(prefix="ember-wheel-", dir="/tmp") as tmp:
            python = self.venv_with_wheel(tmp)
            bin_dir = os.path.dirname(python)
            for command in (["emberd", "--version"], ["emberctl", "--help"],
                            ["ember-run", "--help"]):
                ran = subprocess.run([os.path.join(bin_dir, command[0]), *command[1:]],
                                     capture_output=True, text=True, env=ENV)
                self.assertEqual(ran.returncode, 0, f"{command}: {ran.stdout}{ran.stderr}")
            # The installed emberd loads the wheel's own libraries.
            site = os.path.dirname(os.path.dirname(subprocess.run(
                [python, "-c", "import ember; print(ember.__file__)"], env=ENV,
                capture_output=True, text=True, check=True).stdout.strip()))
            ldd = subprocess.run(["ldd", os.path.join(site, "ember", "bin", "emberd")],
                                 capture_output=True, text=True, check=True).stdout
            capnp = [line for line in ldd.splitlines() if "libcapnp-0.9.2.so" in line]
            self.assertEqual(len(capnp), 1, ldd)
            loaded = os.path.normpath(capnp[0].split("=>")[1].split()[0])
            self.assertEqual(os.path.dirname(loaded), os.path.join(site, "ember", ".libs"))
            # No daemon anywhere: ember.Client() starts the wheel's emberd.
            env = {k: v for k, v in ENV.items() if k not in ("EMBER_SOCKET", "EMBER_EMBERD")}
            env.update(XDG_RUNTIME_DIR=os.path.join(tmp, "run"),
                       XDG_CACHE_HOME=os.path.join(tmp, "cache"), EMBER_IDLE_EXIT="1")
            os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700)
            started = subprocess.run(
                [python, "-c", "import ember, os; c = ember.Client(); "
                 "print(os.readlink(f'/proc/{c.status().pid}/exe'))"],
                env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(started.returncode, 0, started.stderr)
            self.assertEqual(started.stdout.strip(),
                             os.path.realpath(os.path.join(site, "ember", "bin", "emberd")))


if __name__ == "__main__":
    unittest.main()
