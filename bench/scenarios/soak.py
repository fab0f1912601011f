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

With --adversary (issue 36's acceptance; needs root, as it runs real other uids): one
emberd as root with its socket open to all, two honest users (uids 2101, 2102) each reading
a dataset of their own as a trainer would (bazel-bin/bench/adversary honest, a step of
--step-ms after each batch) for the whole run, and --rounds rounds of a quiet phase and a
hostile phase of --phase-seconds each, interleaved: in the hostile one a third uid (2103)
runs bazel-bin/bench/adversary hostile (every finding of the shared-node probes, in turn).
Reports each honest user's batches/s per phase, the hostile/quiet ratio per round (target:
at least 0.9), the slowest Next, emberd's VmRSS (sampled every 0.5 s) per phase, and
whether every attack met its expected refusal. Appends to results/soak.md.

  bench/compare soak --adversary [--rounds 3] [--phase-seconds 20] [--step-ms 10]
"""

import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time

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
    parser.add_argument("--adversary", action="store_true",
                        help="honest users beside a hostile one (needs root)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--phase-seconds", type=float, default=20)


def emberd_sh(function, **env):
    """Runs a function of tools/lib/emberd.sh (arguments through the environment, so that
    no process of its own names the run's directory): (exit status, output)."""
    done = subprocess.run(["bash", "-c", f"source tools/lib/emberd.sh; {function}"],
                          capture_output=True, text=True, env={**os.environ, **env})
    return done.returncode, done.stdout.strip()


def main(ctx, args):
    if args.adversary:
        return main_adversary(ctx, args)
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


HONEST = {"alice": 2101, "bob": 2102}
HOSTILE_UID = 2103
RSS_EVERY_S = 0.5
TARGET_RATIO = 0.9


def as_uid(uid):
    def drop():
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    return drop


def own_dir(parent, name, uid):
    path = os.path.join(parent, name)
    os.makedirs(path)
    os.chown(path, uid, uid)
    return path


def vm_rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main_adversary(ctx, args):
    if os.geteuid() != 0:
        print("soak --adversary: needs root (its users are real other uids)")
        return 1
    ctx.build([*DAEMON_BUILD, "//bench:adversary"])
    os.chmod(ctx.root, 0o755)
    tmp = ctx.tmpdir("soak-adversary")
    os.chmod(tmp, 0o755)
    config = os.path.join(tmp, "ember.yaml")
    with open(config, "w", encoding="utf-8") as f:
        f.write("user_limits: {dataset_memory: 256MiB}\n")
    phase_s = args.phase_seconds
    total_s = 2 * args.rounds * phase_s + 5
    # A copy the other uids may run (bazel-bin lies under root's home).
    binary = os.path.join(tmp, "adversary")
    shutil.copy(os.path.join("bazel-bin", "bench", "adversary"), binary)
    os.chmod(binary, 0o755)
    daemon = Emberd(tmp, "--config", config)
    honest = {}
    rss = []  # (unix s, MiB)
    sampling = threading.Event()

    def sample():
        while not sampling.is_set():
            rss.append((time.time(), vm_rss_mib(daemon.pid)))
            time.sleep(RSS_EVERY_S)
    sampler = threading.Thread(target=sample)
    phases = []  # (round, "quiet" | "hostile", start unix s, end unix s)
    hostile_out, hostile_rc = [], 0
    try:
        os.chmod(daemon.socket, 0o777)
        for name, uid in HONEST.items():
            honest[name] = subprocess.Popen(
                [binary, "honest", "--socket", daemon.socket, "--dir", own_dir(tmp, name, uid),
                 "--name", name, "--seconds", str(total_s), "--step-ms", str(args.step_ms)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                preexec_fn=as_uid(uid))
        sampler.start()
        hostile_dir = own_dir(tmp, "hostile", HOSTILE_UID)
        time.sleep(3)  # the honest users registered and reading
        for r in range(1, args.rounds + 1):
            start = time.time()
            time.sleep(phase_s)
            phases.append((r, "quiet", start, time.time()))
            start = time.time()
            done = subprocess.run(
                [binary, "hostile", "--socket", daemon.socket, "--dir", hostile_dir,
                 "--seconds", str(phase_s)],
                capture_output=True, text=True, preexec_fn=as_uid(HOSTILE_UID),
                timeout=phase_s + 120)
            phases.append((r, "hostile", start, time.time()))
            hostile_out.append(done.stdout)
            hostile_rc = hostile_rc or done.returncode
            ctx.log(f"round {r}: hostile exit {done.returncode}")
        outputs = {name: proc.communicate(timeout=total_s + 60) for name, proc in honest.items()}
    finally:
        sampling.set()
        if sampler.is_alive():
            sampler.join()
        for proc in honest.values():
            if proc.poll() is None:
                proc.kill()
        daemon.close()
    seconds = {}  # name -> [(unix s, batches, slowest ms)]
    failed = []
    for name, (out, err) in outputs.items():
        if honest[name].returncode != 0:
            failed.append(f"{name}: exit {honest[name].returncode}: {err.strip()[-300:]}")
        seconds[name] = [(int(t) / 1000, int(b), float(w))
                         for t, b, w in (line.split() for line in out.splitlines() if line)]

    def in_phase(samples, start, end):
        # A second counts in the phase that holds all of it (its line is written at its end).
        return [s for s in samples if start + 1 <= s[0] <= end]

    rows, ratios = [], {name: [] for name in HONEST}
    for r in range(1, args.rounds + 1):
        by_phase = {kind: (s, e) for rr, kind, s, e in phases if rr == r}
        rates = {}
        for kind, (start, end) in by_phase.items():
            cells = []
            for name in HONEST:
                got = in_phase(seconds[name], start, end)
                rate = sum(b for _, b, _ in got) / max(len(got), 1)
                slowest = max((w for _, _, w in got), default=0.0)
                rates[(name, kind)] = rate
                cells.append(f"{rate:.0f} ({slowest:.1f} ms)")
            mib = [m for t, m in rss if start <= t <= end]
            rows.append(f"| {r} | {kind} | " + " | ".join(cells) +
                        f" | {statistics.mean(mib):.1f} / {max(mib):.1f} |")
        for name in HONEST:
            quiet = rates.get((name, "quiet"), 0)
            ratios[name].append(rates.get((name, "hostile"), 0) / quiet if quiet else 0.0)
    tallies = hostile_out[-1].strip() if hostile_out else ""
    unexpected = [line for out in hostile_out for line in out.splitlines()
                  if line.startswith("unexpected")]
    peak = max((m for _, m in rss), default=0.0)
    medians = {name: statistics.median(v) for name, v in ratios.items()}
    met = all(m >= TARGET_RATIO for m in medians.values())
    rc = 0 if (met and not failed and hostile_rc == 0) else 1
    text = heading(args.command) + (
        f"Commit {commit()}; emberd as root (user_limits.dataset_memory 256MiB), socket open to "
        f"all; honest uids {', '.join(f'{n} {u}' for n, u in HONEST.items())} read their own "
        f"synthetic idx set (batch 32, a {args.step_ms} ms step after each batch); hostile uid "
        f"{HOSTILE_UID}; {args.rounds} rounds of {phase_s:.0f} s quiet then {phase_s:.0f} s "
        f"hostile.\n\n"
        f"| round | phase | {' | '.join(f'{n}: batches/s (slowest Next)' for n in HONEST)} | "
        f"emberd VmRSS MiB, mean / max |\n|---|---|{'---|' * len(HONEST)}---|\n" +
        "\n".join(rows) + "\n\n" +
        "Hostile/quiet batches/s, per round: " +
        "; ".join(f"{n} {', '.join(f'{v:.3f}' for v in ratios[n])} (median {medians[n]:.3f})"
                  for n in HONEST) +
        f"; target at least {TARGET_RATIO}. emberd's VmRSS peaked at {peak:.1f} MiB.\n\n"
        f"Attacks in the last hostile phase (kind, tries, outcomes as expected): "
        f"{'; '.join(tallies.splitlines())}. "
        f"{'Unexpected outcomes: ' + '; '.join(unexpected) if unexpected else 'Every outcome as expected.'}"
        f"{' Honest runs failed: ' + '; '.join(failed) if failed else ''}\n\n"
        f"Result: {'pass' if rc == 0 else 'FAIL'}.\n")
    ctx.append("soak.md", text)
    return rc
