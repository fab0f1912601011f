"""The wheel of //sdk/python:wheel installs into a fresh venv (with the system's site
packages, for Debian's torch) and `import ember` there talks to a real emberd."""

import glob
import os
import subprocess
import tempfile
import unittest

import ember_testing as et


class WheelTest(unittest.TestCase):
    def test_wheel_installs_into_a_fresh_venv(self):
        wheels = glob.glob(et.runfile("sdk/python/ember-*.whl"))
        self.assertEqual(len(wheels), 1, wheels)
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp, \
                et.Daemon() as daemon:
            venv = os.path.join(tmp, "venv")
            subprocess.run([et.python(), "-m", "venv", "--system-site-packages", venv],
                           check=True)
            python = os.path.join(venv, "bin", "python")
            env = dict(os.environ, PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                       PYTHONPATH="", PYTHONNOUSERSITE="1")
            install = subprocess.run([python, "-m", "pip", "install", "--no-index", wheels[0]],
                                     env=env, capture_output=True, text=True)
            self.assertEqual(install.returncode, 0, install.stdout + install.stderr)
            check = subprocess.run(
                [python, "-c",
                 "import ember, sys; c = ember.Client(sys.argv[1]); "
                 "print(ember.__file__); print(c.status().pid)", daemon.socket],
                env=env, capture_output=True, text=True, cwd=tmp)
            self.assertEqual(check.returncode, 0, check.stderr)
            where, pid = check.stdout.split()
            self.assertTrue(where.startswith(venv), where)
            self.assertEqual(int(pid), daemon.pid)


if __name__ == "__main__":
    unittest.main()
