"""Issue 13's soak, by hand: one private emberd, bazel-bin/bench/soak_driver run keeping
--jobs jobs x --ranks reader processes running for --seconds with churn (jobs finish, are
stopped with SIGTERM or lose a rank to SIGKILL; new jobs take their place), emberd's RSS,
Pss, fds, memfds, shm_bytes_in_use and /dev/shm sampled every --sample-every s, every epoch
of every completed job checked to hold each sample exactly once. After emberd stops, checks
that nothing was left behind (tools/lib/emberd.sh's emberd_leftovers). Appends the tables
to results/soak.md. Exit status 1 if a check failed; the failed jobs' logs, samples.tsv and
emberd.log are then kept in a directory it names.

  bench/compare soak [--seconds 600] [--jobs 8] [--ranks 2] [--samples 4000]
                     [--batch-size 32] [--min-epochs 2] [--max-epochs 5] [--step-ms 10]
                     [--sample-every 10] [--seed 1]
"""

import os
import shutil
import subprocess
import tempfile

from emberd import Emberd
from scenarios import DAEMON_BUILD, commit, heading, loadavg

NAME = "soak"
# soak_driver's options, passed on as given (it checks them).
OPTIONS = {"seconds": "600", "jobs": "8", "ranks": "2", "samples": "4000", "batch_size": "32",
           "min_epochs": "2", "max_epochs": "5", "step_ms": "10", "sample_every": "10",
           "seed": "1"}


def add_arguments(parser):
    for name, default in OPTIONS.items():
        parser.add_argument("--" + name.replace("_", "-"), default=default)


def emberd_sh(function, **env):
    """Runs a function of tools/lib/emberd.sh (arguments through the environment, so that
    no process of its own names the run's directory): (exit status, output)."""
    done = subprocess.run(["bash", "-c", f"source tools/lib/emberd.sh; {function}"],
                          capture_output=True, text=True, env={**os.environ, **env})
    return done.returncode, done.stdout.strip()


def main(ctx, args):
    ctx.build([*DAEMON_BUILD, "//bench:soak_driver"])
    _, shm_before = emberd_sh("emberd_shm_names")
    load_before = loadavg()
    tmp = ctx.tmpdir("soak")
    report = os.path.join(tmp, "report.md")
    daemon = Emberd(tmp)
    try:
        flags = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in OPTIONS]
        rc = subprocess.run(["bazel-bin/bench/soak_driver", "run", "--socket", daemon.socket,
                             "--dir", tmp, *flags, "--report", report]).returncode
        load_after = loadavg()
    finally:
        daemon.close()
    if daemon.proc.returncode != 0:
        print(f"soak: emberd exited with {daemon.proc.returncode}")
        rc = 1
    left, leftovers = emberd_sh('emberd_leftovers "$RUN_DIR" "$SHM_BEFORE"', RUN_DIR=tmp,
                                SHM_BEFORE=shm_before)
    rc = rc or left
    print(leftovers or "leftovers after emberd stopped: none")
    if rc != 0:
        kept = tempfile.mkdtemp(prefix="ember-soak-failed.", dir="/tmp")
        for name in ("logs", "samples.tsv", "emberd.log"):
            path = os.path.join(tmp, name)
            if os.path.isdir(path):
                shutil.copytree(path, os.path.join(kept, name))
            elif os.path.exists(path):
                shutil.copy(path, kept)
        print(f"soak: a check failed; the failed jobs' logs, samples.tsv and emberd.log are in "
              f"{kept}")
    try:
        with open(report, encoding="utf-8") as f:
            tables = f.read()
    except OSError:
        tables = f"(soak_driver wrote no report; exit status {rc})"
    text = heading(args.command) + (
        f"Commit {commit()}; load averages before {load_before}, after {load_after}.\n\n"
        f"{tables}\n\nAfter emberd stopped (SIGTERM, exit 0 expected): "
        f"{leftovers or 'nothing left behind (processes, /dev/shm, memfds)'}. "
        f"Result: {'pass' if rc == 0 else 'FAIL'}.\n")
    ctx.append("soak.md", text, show=False)
    print("\n".join(text.strip().splitlines()[-5:]))
    return 1 if rc else 0
