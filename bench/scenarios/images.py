"""images: JPEG decode + RandomResizedCrop(224) + horizontal flip, uint8 CHW, batch 64,
1 and 2 ranks, on two folders: the bench folder (bench/make_jpeg_folder.py: 2,000
Fashion-MNIST images upscaled to 256x256, smooth and small) and real photographs
(bench/make_photo_folder.py: 2,000 crops of 300-500 px from Debian's mate-backgrounds).
Systems, each at its best documented configuration for 2 cores (bench/README.md says why):
  decode-limit   bench/decode_limit: emberd's decode code, one process per core, files in
                 memory, no loader, output written to shared memory: the ceiling
  ember-folder   emberd on the folder (imagefolder format) + bench/loader_bench readers,
                 bracketed by two short decode-limit runs (just before, just after): its
                 share of the limit is against their mean
  ember-packed   the same on the folder packed (emberctl pack)
  dataloader     torch DataLoader + torchvision (bench/dataloader_baseline.py), workers =
                 cores / ranks per rank
  dali-cpu       DALI's CPU pipeline (bench/baselines/dali_images.py)
  spdl           SPDL's pipeline (bench/baselines/spdl_images.py)
The ranks only receive their batches (the same consumer everywhere). Per run: images/s
after warm-up, CPU seconds per image (the CPU of every process of the run over the
measured window: bench/measure.py's series), peak PSS over every process."""

import os
import re
import subprocess

import measure
from emberd import Emberd
from scenarios import Run, by_key, median, median_spread, figure, save_figure

NAME = "images"
TITLE = "Images: JPEG decode + RandomResizedCrop 224 + flip, uint8, batch 64"
PIPELINE = "configs/pipelines/imagenet_train.yaml"
BATCH = 64
FOLDERS = ("bench", "photos")
RANKS = (1, 2)
PEERS = ("dataloader", "dali-cpu", "spdl")
SYSTEMS = ("decode-limit", "ember-folder", "ember-packed") + PEERS
BUILD = ["//daemon:emberd", "//tools/emberctl:emberctl", "//bench:loader_bench",
         "//bench:decode_limit"]


# What makes each folder: the script and its options beyond --count 2000.
MAKERS = {
    "bench": ("bench/make_jpeg_folder.py", []),
    "photos": ("bench/make_photo_folder.py", []),
    # The same photographs in crops of 800-1024 px (~5x the pixels, as COCO's or Open
    # Images' originals): decoding costs more per row of 224x224.
    "photos-large": ("bench/make_photo_folder.py", ["--min-size", "800", "--max-size", "1024"]),
}


def folder(ctx, which):
    """The cached folder `which` (a key of MAKERS), made on first use."""
    path = os.path.join(ctx.cache, f"{which}-2000")
    if not os.path.isdir(path):
        script, options = MAKERS[which]
        subprocess.run(["/usr/bin/python3", script, path + ".tmp", "--count", "2000", *options],
                       check=True, stdout=subprocess.DEVNULL)
        os.rename(path + ".tmp", path)
    return path


def packed(ctx, which):
    path = folder(ctx, which) + ".packed"
    if not os.path.exists(path):
        subprocess.run(["bazel-bin/tools/emberctl/emberctl", "pack", folder(ctx, which),
                        path + ".tmp", "--quiet"], check=True)
        os.rename(path + ".tmp", path)
    return path


def prepare(ctx):
    ctx.build(BUILD)
    for which in FOLDERS:
        packed(ctx, which)
    ctx.venv_python()


def window_cpu_per_image(ctx, measured, images_per_s):
    """CPU seconds per image over the measured window: the last --seconds of the run
    before its teardown (0.5 s off each end)."""
    end = measured["wall_s"] - 0.5
    rate = measure.cpu_rate(measured["cpu_series"], end - ctx.seconds + 1.0, end)
    return rate / images_per_s if rate and images_per_s else None


def _finish(ctx, label, measured, pattern, expected=1):
    out = measured.pop("output")
    rates = [float(x) for x in re.findall(pattern, out)]
    if measured["rc"] != 0 or len(rates) != expected:
        ctx.fail(label, out)
    rate = sum(rates)
    return {**measured, "images_per_s": rate,
            "cpu_s_per_image": window_cpu_per_image(ctx, measured, rate)}


# Seconds of each decode-limit run that brackets an Ember run.
BRACKET_SECONDS = 4


def _bracket_limit(ctx, which):
    """The decode limit's images/s on `which`, a short run next to an Ember run."""
    measured = _run_limit(ctx, which, BRACKET_SECONDS)
    found = re.findall(r"images_per_s=([0-9.]+)", measured["output"])
    if measured["rc"] != 0 or not found:
        ctx.fail(f"decode_limit {which} (bracket)", measured["output"])
    return float(found[-1])


def _ember(ctx, which, ranks, fmt):
    """Ember on `which`, bracketed by the decode limit just before and just after (this
    machine drifts 5-10% within minutes: the limit of the round is minutes away)."""
    before = _bracket_limit(ctx, which)
    record = _ember_run(ctx, which, ranks, fmt)
    after = _bracket_limit(ctx, which)
    bracket = (before + after) / 2
    return {**record, "limit_before_images_per_s": before, "limit_after_images_per_s": after,
            "vs_bracket_limit": record["images_per_s"] / bracket}


def _ember_run(ctx, which, ranks, fmt):
    daemon = Emberd(ctx.tmpdir("emberd"))
    try:
        path = packed(ctx, which) if fmt == "packed" else folder(ctx, which)
        daemon.ctl("dataset", "add", "images", "--format", "packed" if fmt == "packed" else
                   "imagefolder", "--path", path, "--pipeline", PIPELINE)
        measured = measure.run(["bazel-bin/bench/loader_bench", "--socket", daemon.socket,
                                "images", "--ranks", str(ranks), "--batch-size", str(BATCH),
                                "--seconds", str(ctx.seconds)], pids=[daemon.pid], timeout=600)
    finally:
        daemon.close()
    return _finish(ctx, f"ember-{fmt} {which} ranks={ranks}", measured,
                   r"bench: samples_per_s=([0-9.]+)")


def _dataloader(ctx, which, ranks):
    workers = max(1, (os.cpu_count() or 2) // ranks)
    for attempt in (1, 2, 3):  # Debian's torch 1.13 workers sometimes abort at shutdown
        measured = measure.run(["/usr/bin/python3", "bench/dataloader_baseline.py", "--imagefolder",
                                folder(ctx, which), "--ranks", str(ranks), "--workers",
                                str(workers), "--batch-size", str(BATCH), "--seconds",
                                str(ctx.seconds)], timeout=600)
        if measured["rc"] == 0 or attempt == 3:
            break
    return {**_finish(ctx, f"dataloader {which} ranks={ranks}", measured,
                      r"baseline: samples_per_s=([0-9.]+)"), "workers_per_rank": workers}


def _peer(ctx, which, ranks, script, system):
    measured = measure.run([ctx.venv_python(), script, "--folder", folder(ctx, which), "--ranks",
                            str(ranks), "--batch-size", str(BATCH), "--seconds", str(ctx.seconds)],
                           timeout=600)
    return _finish(ctx, f"{system} {which} ranks={ranks}", measured,
                   r'result: .*"images_per_s": ([0-9.]+)')


def _run_limit(ctx, which, seconds):
    return measure.run(["bazel-bin/bench/decode_limit", "--dir", folder(ctx, which),
                        "--pipeline", PIPELINE, "--seconds", str(seconds)], timeout=600)


def decode_limit(ctx, which):
    """bench/decode_limit on the folder `which`: images/s and its own CPU per image."""
    measured = _run_limit(ctx, which, ctx.seconds)
    out = measured["output"]
    record = _finish(ctx, f"decode_limit {which}", measured, r"images_per_s=([0-9.]+)")
    found = re.findall(r"cpu_us_per_image=([0-9.]+)", out)
    if found:  # its own account: decode only, no process start-up
        record["cpu_s_per_image"] = float(found[-1]) / 1e6
    return record


def runs(ctx):
    out = []
    for which in FOLDERS:
        out.append(Run("decode-limit", f"{which}", lambda ctx, w=which: decode_limit(ctx, w)))
        for r in RANKS:
            case = f"{which}, ranks={r}"
            out += [Run("ember-folder", case, lambda ctx, w=which, r=r: _ember(ctx, w, r, "folder")),
                    Run("ember-packed", case, lambda ctx, w=which, r=r: _ember(ctx, w, r, "packed")),
                    Run("dataloader", case, lambda ctx, w=which, r=r: _dataloader(ctx, w, r)),
                    Run("dali-cpu", case, lambda ctx, w=which, r=r: _peer(
                        ctx, w, r, "bench/baselines/dali_images.py", "dali-cpu")),
                    Run("spdl", case, lambda ctx, w=which, r=r: _peer(
                        ctx, w, r, "bench/baselines/spdl_images.py", "spdl"))]
    return out


def report(records):
    runs_ = by_key(records)
    lines = ["| folder, ranks | system | images/s | vs decode limit | CPU ms/image | peak PSS MiB "
             "| Ember (best) images/s vs this | Ember PSS vs this |", "|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for which in FOLDERS:
        limit = median(runs_.get((which, "decode-limit"), {}), "images_per_s")
        limit_cpu = median(runs_.get((which, "decode-limit"), {}), "cpu_s_per_image")
        lines.append(f"| {which} | decode-limit | "
                     f"{median_spread(runs_.get((which, 'decode-limit'), {}), 'images_per_s', '{:,.0f}')} "
                     f"| 100% | {limit_cpu * 1000 if limit_cpu else 0:.2f} | | | |")
        for r in RANKS:
            case = f"{which}, ranks={r}"
            embers = {s: runs_.get((case, s), {}) for s in ("ember-folder", "ember-packed")}
            best = max(embers, key=lambda s: median(embers[s], "images_per_s") or 0)
            best_rate = median(embers[best], "images_per_s")
            best_pss = median(embers[best], "peak_pss_mib")
            peer_rates, peer_pss = {}, {}
            for system in SYSTEMS[1:]:
                rr = runs_.get((case, system))
                if not rr:
                    continue
                rate, pss = median(rr, "images_per_s"), median(rr, "peak_pss_mib")
                cpu = median(rr, "cpu_s_per_image")
                versus = ("", "") if system.startswith("ember") else (
                    f"{best_rate / rate:.1f}x" if best_rate and rate else "",
                    f"{best_pss / pss:.2f}x" if best_pss and pss else "")
                if not system.startswith("ember"):
                    peer_rates[system], peer_pss[system] = rate, pss
                bracketed = median(rr, "vs_bracket_limit")
                versus_limit = (f"{100 * bracketed:.0f}% (bracketed; "
                                f"{median_spread(rr, 'vs_bracket_limit', '{:.2f}')})"
                                if bracketed else
                                f"{100 * rate / limit:.0f}%" if limit and rate else "")
                lines.append(f"| {case} | {system} | {median_spread(rr, 'images_per_s', '{:,.0f}')} "
                             f"| {versus_limit} "
                             f"| {f'{cpu * 1000:.2f}' if cpu else ''} "
                             f"| {median_spread(rr, 'peak_pss_mib', '{:.0f}')} | {versus[0]} | {versus[1]} |")
            if peer_rates and best_rate:
                top = max(peer_rates, key=peer_rates.get)
                light = min(peer_pss, key=peer_pss.get)
                # Against the limit bracketing each run when there is one, else the round's.
                share = median(embers[best], "vs_bracket_limit") or best_rate / limit
                verdicts.append(
                    f"- {case}: Ember ({best}) {best_rate / peer_rates[top]:.1f}x the best peer "
                    f"({top}) (target 3x: {'met' if best_rate >= 3 * peer_rates[top] else '**missed**'}); "
                    f"PSS {best_pss:.0f} MiB vs the lightest peer's {peer_pss[light]:.0f} ({light}): "
                    f"{'met' if best_pss <= peer_pss[light] else '**missed**'}; "
                    f"{100 * share:.0f}% of the decode limit"
                    f"{' (run just before and after each of its runs)' if median(embers[best], 'vs_bracket_limit') else ''}"
                    f" (target 97%: {'met' if share >= 0.97 else '**missed**'}).")
    return "\n".join(lines + [""] + verdicts)


def summary(records):
    """The README's rows: per folder at 2 ranks, Ember's best against the best peer."""
    runs_ = by_key(records)
    lines = ["| folder, 2 ranks | Ember images/s (% of decode limit) | best peer images/s "
             "| Ember vs it | Ember PSS vs lightest peer |", "|---|---|---|---|---|"]
    for which in FOLDERS:
        case = f"{which}, ranks={RANKS[-1]}"
        limit = median(runs_.get((which, "decode-limit"), {}), "images_per_s")
        embers = {s: runs_.get((case, s), {}) for s in ("ember-folder", "ember-packed")}
        best = max(embers, key=lambda x: median(embers[x], "images_per_s") or 0)
        rate, pss = median(embers[best], "images_per_s"), median(embers[best], "peak_pss_mib")
        peers = {p: runs_[case, p] for p in PEERS if (case, p) in runs_}
        if not rate or not peers or not limit:
            continue
        top = max(peers, key=lambda p: median(peers[p], "images_per_s"))
        light = min(peers, key=lambda p: median(peers[p], "peak_pss_mib"))
        top_rate = median(peers[top], "images_per_s")
        share = median(embers[best], "vs_bracket_limit") or rate / limit
        lines.append(f"| {which} | {rate:,.0f} {best[6:]} ({100 * share:.0f}%) "
                     f"| {top_rate:,.0f} ({top}) | {rate / top_rate:.1f}x "
                     f"| {pss:.0f} vs {median(peers[light], 'peak_pss_mib'):.0f} MiB ({light}) |")
    return "\n".join(lines)


def plot(records, path):
    runs_ = by_key(records)
    cases = [f"{w}, ranks={r}" for w in FOLDERS for r in RANKS]
    fig, axes = figure(2, (13, 4))
    width = 0.8 / (len(SYSTEMS) - 1)
    for i, system in enumerate(SYSTEMS[1:]):
        xs = [k + i * width for k in range(len(cases))]
        for ax, key in ((axes[0], "images_per_s"), (axes[1], "peak_pss_mib")):
            ax.bar(xs, [median(runs_.get((c, system), {}), key) or 0 for c in cases], width,
                   label=system)
    for k, which in enumerate(FOLDERS):
        limit = median(runs_.get((which, "decode-limit"), {}), "images_per_s")
        if limit:
            axes[0].hlines(limit, 2 * k - 0.1, 2 * k + 1.9, linestyles="--", colors="black",
                           label="decode limit" if k == 0 else None)
    for ax, title in ((axes[0], "images/s"), (axes[1], "peak PSS, MiB")):
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(cases))])
        ax.set_xticklabels(cases)
        ax.set_title(title)
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=8)
    save_figure(fig, TITLE, path)
