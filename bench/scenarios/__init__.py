"""The scenarios of bench/compare. Each module has
    NAME, TITLE: its --scenario name and the heading of its results,
    prepare(ctx): builds or generates what its runs need (once per invocation),
    runs(ctx): the list of Run(system, case, fn), one round of the scenario; bench/compare
        runs the list --repeat times, rotating its order each round (interleaved),
    report(records): markdown (tables, ratios, targets) from all rounds' records,
    plot(records, path): a PNG at path.
fn(ctx) returns a record: a dict of figures (wall_s, peak_pss_mib, cpu_s, ...)."""

import collections
import dataclasses
import statistics
from typing import Callable


@dataclasses.dataclass
class Run:
    system: str
    case: str
    fn: Callable


def by_key(records):
    """(case, system) -> {round: record}."""
    out = collections.defaultdict(dict)
    for r in records:
        out[r["case"], r["system"]][r["round"]] = r
    return out


def median_spread(rounds, key, fmt="{:.1f}"):
    """'median (min-max)' of key over the rounds' records that have it."""
    values = [r[key] for r in rounds.values() if r.get(key) is not None]
    if not values:
        return ""
    m = statistics.median(values)
    if len(values) == 1:
        return fmt.format(m)
    return f"{fmt.format(m)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def median(rounds, key):
    values = [r[key] for r in rounds.values() if r.get(key) is not None]
    return statistics.median(values) if values else None


def ratio(a_rounds, b_rounds, key):
    """The median over rounds of a's figure / b's in the same round (side by side)."""
    values = [a_rounds[k][key] / b_rounds[k][key] for k in a_rounds
              if k in b_rounds and a_rounds[k].get(key) and b_rounds[k].get(key)]
    return statistics.median(values) if values else None


def fmt_ratio(value, target=None):
    if value is None:
        return ""
    text = f"{value:.2f}x"
    if target is not None:
        text += " (met)" if value <= target else f" (**missed**, target {target:.2f}x)"
    return text


def figure(columns, size):
    """A row of `columns` plots (matplotlib, no display): (fig, axes)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt.subplots(1, columns, figsize=size)


def save_figure(fig, title, path):
    import matplotlib.pyplot as plt
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
