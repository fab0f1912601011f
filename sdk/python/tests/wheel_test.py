"""The wheel of //sdk/python:wheel installs into a fresh venv (with the system's site
packages, for Debian's torch) and `import ember` there talks to a real emberd; and into
a venv without them, with numpy only (no torch), where batches come as numpy arrays."""

import glob
import os
import subprocess
import tempfile
import unittest

import ember_testing as et


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


if __name__ == "__main__":
    unittest.main()
