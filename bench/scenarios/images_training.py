"""images-training: the comparison where input is the bottleneck. A small CNN
(sdk/examples/python/train_images.py's SmallCnn: the 224x224 crop averaged down 4x on the
fly, two strided convolutions, a linear layer: a step costs less than decoding its batch)
trained by 2 data-parallel ranks on 2 cores, 2 epochs (--epochs), batch 64 a rank, Adam 3e-3, seed =
round - 1, RandomResizedCrop(224) + horizontal flip; scored on 500 other photographs
(resize 256, center crop 224). Two folders of real photographs (bench/make_photo_folder.py,
12 classes, one per source photograph): photos (2,000 crops of 300-500 px) and photos-large
(2,000 of 800-1024 px: 5x the pixels to decode). Systems, in interleaved rounds:
  ember-train    sdk/examples/python/train_images.py: ember.train, 2 workers; a private
                 emberd started for the run decodes (its memory counts)
  dataloader-wK  bench/baselines/dataloader_images_train.py: DDP + torch DataLoader over
                 torchvision's ImageFolder with the same transforms, K = 1, 2, 4 worker
                 processes a rank (the best of them is the target's)
  ray-train      bench/baselines/ray_images_train.py: Ray Train's TorchTrainer, Ray Data's
                 read_images + map_batches with the same transforms (bench venv)
  dali-cpu       bench/baselines/dali_images_train.py: DDP + DALI's CPU pipeline (bench venv)
Wall time from launch to exit, rank 0's training time, test accuracy, peak PSS over every
process of the run (bench/measure.py). Targets: Ember <= 0.5x Ray Train's wall time and
<= 0.25x its PSS; <= 0.6x the best DataLoader's time; accuracy within 1 point of the
DataLoader's with the same seeds (medians over the rounds)."""

import os
import re
import subprocess

import measure
from emberd import Emberd
from scenarios import Run, by_key, fmt_ratio, median, median_spread, ratio, figure, save_figure
from scenarios.images import MAKERS, folder

NAME = "images-training"
TITLE = "Training where input is the bottleneck: photographs, small CNN, 2 ranks"
FOLDERS = ("photos", "photos-large")
LOADER_WORKERS = (1, 2, 4)
SYSTEMS = (["ember-train"] + [f"dataloader-w{k}" for k in LOADER_WORKERS] +
           ["ray-train", "dali-cpu"])
BUILD = ["//daemon:emberd", "//tools/emberctl:emberctl", "//sdk/python:ember"]
EXAMPLE = "sdk/examples/python/train_images.py"
VAL_COUNT = 500


def validation(ctx, which):
    """500 other photographs of `which`'s kind (--seed 1), made on first use."""
    path = os.path.join(ctx.cache, f"{which}-val-{VAL_COUNT}")
    if not os.path.isdir(path):
        script, options = MAKERS[which]
        subprocess.run(["/usr/bin/python3", script, path + ".tmp", "--count", str(VAL_COUNT),
                        "--seed", "1", *options], check=True, stdout=subprocess.DEVNULL)
        os.rename(path + ".tmp", path)
    return path


def prepare(ctx):
    ctx.build(BUILD)
    ctx.python_ember()
    for which in FOLDERS:
        folder(ctx, which)
        validation(ctx, which)
    ctx.venv_python()


def _timeout(ctx):
    return 300 + 300 * ctx.epochs


def _common(ctx, which):
    return ["--train", folder(ctx, which), "--val", validation(ctx, which),
            "--epochs", str(ctx.epochs), "--batch-size", "64", "--lr", "3e-3",
            "--seed", str(ctx.round - 1)]


def _result(ctx, system, measured):
    out = measured.pop("output")
    found = re.findall(r"result: test_accuracy=([0-9.]+) train_seconds=([0-9.]+)", out)
    if measured["rc"] != 0 or not found:
        ctx.fail(system, out)
    accuracy, train_s = found[-1]
    return {**measured, "accuracy": float(accuracy), "train_s": float(train_s),
            "seed": ctx.round - 1, "epochs": ctx.epochs}


def _ember(ctx, which):
    daemon = Emberd(ctx.tmpdir("ember-train"))
    try:
        env = {**daemon.env(), "PYTHONPATH": ctx.python_ember(), "GLOO_SOCKET_IFNAME": "lo"}
        measured = measure.run(["/usr/bin/python3", EXAMPLE, "--workers", "2",
                                *_common(ctx, which)], env=env, pids=[daemon.pid],
                               timeout=_timeout(ctx))
    finally:
        daemon.close()
    return _result(ctx, "ember-train", measured)


def _dataloader(ctx, which, workers):
    command = [ctx.venv_python(), "bench/baselines/dataloader_images_train.py", "--ranks", "2",
               "--loader-workers", str(workers), *_common(ctx, which)]
    # Debian's torch 1.13 DataLoader now and then loses a worker at shutdown: two retries.
    for attempt in (1, 2, 3):
        measured = measure.run(command, timeout=_timeout(ctx))
        if measured["rc"] == 0 or attempt == 3:
            break
        ctx.log(f"dataloader-w{workers}: attempt {attempt} failed, retrying")
    return _result(ctx, f"dataloader-w{workers}", measured)


def _ray(ctx, which):
    temp = ctx.tmpdir("ray")
    measured = measure.run([ctx.venv_python(), "bench/baselines/ray_images_train.py",
                            "--temp-dir", temp, "--ranks", "2", *_common(ctx, which)],
                           match=[temp], timeout=_timeout(ctx))
    return _result(ctx, "ray-train", measured)


def _dali(ctx, which):
    measured = measure.run([ctx.venv_python(), "bench/baselines/dali_images_train.py",
                            "--ranks", "2", *_common(ctx, which)], timeout=_timeout(ctx))
    return _result(ctx, "dali-cpu", measured)


def runs(ctx):
    out = []
    for which in FOLDERS:
        out.append(Run("ember-train", which, lambda ctx, w=which: _ember(ctx, w)))
        for k in LOADER_WORKERS:
            out.append(Run(f"dataloader-w{k}", which,
                           lambda ctx, w=which, k=k: _dataloader(ctx, w, k)))
        out.append(Run("ray-train", which, lambda ctx, w=which: _ray(ctx, w)))
        out.append(Run("dali-cpu", which, lambda ctx, w=which: _dali(ctx, w)))
    return out


def _best_dataloader(runs_, which):
    """The DataLoader configuration with the shortest median wall time on `which`."""
    found = [(median(runs_[which, s], "wall_s"), s) for s in SYSTEMS
             if s.startswith("dataloader") and (which, s) in runs_
             and median(runs_[which, s], "wall_s")]
    return min(found)[1] if found else None


def report(records):
    runs_ = by_key(records)
    lines = ["| folder | system | wall s | train s | test accuracy | peak PSS MiB | CPU s "
             "| ember-train time / PSS vs this |", "|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for which in FOLDERS:
        ember = runs_.get((which, "ember-train"), {})
        best = _best_dataloader(runs_, which)
        for system in SYSTEMS:
            r = runs_.get((which, system))
            if not r:
                continue
            versus = ""
            if system != "ember-train" and ember:
                time_target = {"ray-train": 0.5}.get(system, 0.6 if system == best else None)
                pss_target = 0.25 if system == "ray-train" else None
                versus = (f"{fmt_ratio(ratio(ember, r, 'wall_s'), time_target)} / "
                          f"{fmt_ratio(ratio(ember, r, 'peak_pss_mib'), pss_target)}")
            lines.append(f"| {which} | {system}{' (best DataLoader)' if system == best else ''} "
                         f"| {median_spread(r, 'wall_s')} | {median_spread(r, 'train_s')} "
                         f"| {median_spread(r, 'accuracy', '{:.4f}')} "
                         f"| {median_spread(r, 'peak_pss_mib', '{:.0f}')} "
                         f"| {median_spread(r, 'cpu_s', '{:.0f}')} | {versus} |")
        if ember and best:
            theirs = runs_[which, best]
            gap = abs(median(ember, "accuracy") - median(theirs, "accuracy")) * 100
            paired = [f"{(ember[k]['accuracy'] - theirs[k]['accuracy']) * 100:+.1f}"
                      for k in sorted(ember) if k in theirs]
            epochs = sorted({r.get("epochs", 2) for r in ember.values()})
            verdicts.append(f"- {which}, {'/'.join(map(str, epochs))} epochs: test accuracy, "
                            f"medians over the rounds' seeds: ember-train "
                            f"{median(ember, 'accuracy'):.4f}, {best} "
                            f"{median(theirs, 'accuracy'):.4f}: {gap:.1f} points (target 1: "
                            f"{'met' if gap <= 1 else '**missed**'}); Ember minus {best}, "
                            f"round by round (same seed): {', '.join(paired)} points.")
    return "\n".join(lines + [""] + verdicts)


def summary(records):
    """The README's rows: per folder, Ember, the best DataLoader, Ray Train and DALI: wall
    time, accuracy, PSS and ember-train's ratios against each."""
    runs_ = by_key(records)
    epochs = "/".join(str(e) for e in sorted({r.get("epochs", 2) for r in records}))
    lines = [f"| folder ({epochs} epochs) | system | wall s | test accuracy | peak PSS MiB "
             "| ember-train time / PSS vs this |", "|---|---|---|---|---|---|"]
    for which in FOLDERS:
        ember = runs_.get((which, "ember-train"), {})
        for system in ("ember-train", _best_dataloader(runs_, which), "ray-train", "dali-cpu"):
            r = runs_.get((which, system))
            if not r:
                continue
            versus = "" if system == "ember-train" or not ember else (
                f"{fmt_ratio(ratio(ember, r, 'wall_s'))} / "
                f"{fmt_ratio(ratio(ember, r, 'peak_pss_mib'))}")
            lines.append(f"| {which} | {system} | {median(r, 'wall_s'):.1f} "
                         f"| {median(r, 'accuracy'):.4f} | {median(r, 'peak_pss_mib'):,.0f} "
                         f"| {versus} |")
    return "\n".join(lines)


def plot(records, path):
    runs_ = by_key(records)
    fig, axes = figure(2, (11, 3.8))
    for ax, key, label in ((axes[0], "wall_s", "wall time, s"),
                           (axes[1], "peak_pss_mib", "peak PSS, MiB (all processes)")):
        names, values, colors = [], [], []
        for which in FOLDERS:
            for system in SYSTEMS:
                if (which, system) in runs_:
                    names.append(f"{system}\n{which}")
                    values.append(median(runs_[which, system], key) or 0)
                    colors.append("tab:orange" if system == "ember-train" else "tab:gray")
        ax.bar(names, values, color=colors)
        ax.set_title(label)
        ax.tick_params(axis="x", rotation=60, labelsize=7)
    save_figure(fig, TITLE, path)
