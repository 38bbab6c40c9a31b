"""Simulation outputs: the JSON record, a CSV of columns, a summary table, and a plot.

Files are written atomically (a temporary file renamed into place), so a failed run never leaves
a partial result behind.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runtimekit.base.files import replacing
from runtimekit.sim.bound import BoundResult
from runtimekit.sim.replay import ReplayResult
from runtimekit.sim.runner import SimulationReport

SUMMARY_COLUMNS = ("90", "100", "110", "130")


def report_json(report: SimulationReport) -> str:
    return json.dumps(report.to_json(), indent=2) + "\n"


def report_csv(results: Sequence[ReplayResult]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    columns = [str(k) for k in range(131)]
    writer.writerow(["policy", "seed", "arrived_pods", "failed_pods", "total_gpus", "seconds", *columns])
    for r in results:
        writer.writerow(
            [
                r.policy,
                r.seed,
                r.arrived_pods,
                r.failed_pods,
                r.total_gpus,
                f"{r.seconds:.3f}",
                *("" if r.columns.get(c) is None else r.columns[c] for c in columns),
            ]
        )
    return out.getvalue()


@dataclass(frozen=True)
class Cell:
    mean: float
    low: float
    high: float
    stdev: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:.2f} [{self.low:.2f}, {self.high:.2f}]"


def summarize(results: Sequence[ReplayResult], columns: Sequence[str] = SUMMARY_COLUMNS) -> dict[str, dict[str, Cell]]:
    """policy -> column -> mean [min, max] over seeds."""
    by_policy: dict[str, list[ReplayResult]] = {}
    for r in results:
        by_policy.setdefault(r.policy, []).append(r)
    out: dict[str, dict[str, Cell]] = {}
    for policy, runs in by_policy.items():
        out[policy] = {}
        for column in columns:
            values = [v for r in runs if (v := r.columns.get(column)) is not None]
            if values:
                out[policy][column] = Cell(
                    round(statistics.fmean(values), 2),
                    min(values),
                    max(values),
                    statistics.stdev(values) if len(values) > 1 else 0.0,
                    len(values),
                )
    return out


def bound_summary(bounds: Sequence[BoundResult]) -> dict[str, tuple[float, float]]:
    """column -> (mean upper, mean lower) over the seeds that bound it."""
    out: dict[str, tuple[float, float]] = {}
    columns = sorted({c for b in bounds for c in b.columns}, key=int)
    for column in columns:
        cells = [b.columns[column] for b in bounds if column in b.columns]
        out[column] = (statistics.fmean(c.upper for c in cells), statistics.fmean(c.lower for c in cells))
    return out


def render_table(results: Sequence[ReplayResult], title: str = "", bounds: Sequence[BoundResult] = ()) -> str:
    """The summary as a rich table rendered to text; with bounds, a last row gives the offline limit
    (mean upper bound over seeds, the checked packings' mean after the slash)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        title=escape(title or "GPU allocation (% of GPUs) at arrived % of capacity: mean [min, max] over seeds")
    )
    table.add_column("policy")
    table.add_column("seeds", justify="right")
    for column in SUMMARY_COLUMNS:
        table.add_column(f"@{column}", justify="right")
    for policy, cells in summarize(results).items():
        n = max((c.n for c in cells.values()), default=0)
        table.add_row(policy, str(n), *(str(cells[c]) if c in cells else "-" for c in SUMMARY_COLUMNS))
    if bounds:
        limit = bound_summary(bounds)
        table.add_row(
            "offline bound",
            str(len(bounds)),
            *(f"{limit[c][0]:.2f} / {limit[c][1]:.2f}" if c in limit else "-" for c in SUMMARY_COLUMNS),
        )
    out = io.StringIO()
    Console(file=out, width=120, force_terminal=False).print(table)
    return out.getvalue()


def plot(
    results: Sequence[ReplayResult], path: str | Path, title: str = "", bounds: Sequence[BoundResult] = ()
) -> None:
    """Allocation % against arrived % per policy (median over seeds, band = min..max), as the
    paper's Fig. 9a shows it, written atomically as PNG. With bounds, the offline limit (mean upper
    bound over seeds) is marked in black at the bounded columns, in the zoom too: between two
    columns far apart it is not known, so they are joined only when adjacent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = list(range(131))
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    by_policy: dict[str, list[ReplayResult]] = {}
    for r in results:
        by_policy.setdefault(r.policy, []).append(r)
    for policy, runs in by_policy.items():
        series = [[v for r in runs if (v := r.columns.get(str(x))) is not None] for x in xs]
        pts = [(x, statistics.median(v), min(v), max(v)) for x, v in zip(xs, series, strict=True) if v]
        line = ax.plot([p[0] for p in pts], [p[1] for p in pts], label=policy, linewidth=1.6)
        ax.fill_between(
            [p[0] for p in pts],
            [p[2] for p in pts],
            [p[3] for p in pts],
            color=line[0].get_color(),
            alpha=0.15,
            linewidth=0,
        )
    limit = sorted(((int(c), up) for c, (up, _) in bound_summary(bounds).items()), key=lambda p: p[0])
    if limit:  # markers at the bounded columns; a line only where they are next to each other
        ax.plot([p[0] for p in limit], [p[1] for p in limit], "k.", label="offline bound")
        for left, right in itertools.pairwise(limit):
            if right[0] - left[0] <= 1:
                ax.plot([left[0], right[0]], [left[1], right[1]], color="black", linestyle="--", linewidth=1)
    ax.plot([0, 100], [0, 100], color="grey", linestyle=":", linewidth=1, label="ideal")
    ax.set_xlim(0, 130)
    ax.set_ylim(0, 100)
    ax.set_xlabel("arrived GPU requests (% of cluster GPU capacity)")
    ax.set_ylabel("allocated GPUs (% of cluster GPUs)")
    ax.set_title(title or "GPU allocation as workloads arrive")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    inset = ax.inset_axes((0.08, 0.55, 0.4, 0.38))
    for runs in by_policy.values():
        zoom = [
            (x, statistics.median(values))
            for x in range(80, 131)
            if (values := [c for r in runs if (c := r.columns.get(str(x))) is not None])
        ]
        inset.plot([p[0] for p in zoom], [p[1] for p in zoom], linewidth=1.2)
    near = [p for p in limit if p[0] >= 80]
    if near:
        inset.plot([p[0] for p in near], [p[1] for p in near], "k.")
    inset.set_title("zoom: arrived 80-130 %", fontsize=8)
    inset.tick_params(labelsize=7)
    inset.grid(True, alpha=0.3)
    try:
        with replacing(path, suffix=".png", durable=False) as tmp:
            fig.savefig(tmp, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)
