"""The offline limit of every openb pod list: per list, seed and column, an upper bound on the GPU
allocation of any packing of the arrived pods and a checked packing (lower bound)
(docs/results/offline-bound.md; `runtimekit simulate --bound` gives the same beside the policies).

Per (list, seed, column) the JSON row has the column's upper and lower bound (% of GPUs, mean over
the column's events) and, with --gpu-only, the largest amount by which dropping every CPU and
memory request raises the upper bound at the column's boundary prefixes (0 means CPU and memory
change no bound there). With --floor POLICY it also has the floor limit (sim/floor_bound.py): the
most a policy can reach that never falls more than --floor-slack points behind POLICY's replay at
any column from 50 on ("floor_upper", the column whose floor gave it, and POLICY's own column as
"reference"); with --set POLICY, the set limit: the most a packing keeping every pod that POLICY's
replay placed can reach ("set_upper", and POLICY's column as "policy"), and the pods beyond them that
the LP behind that limit places ("set_adds", GPU-equivalents per kind: what the kept pods, packed
anew, leave room for). Per list and column the summary gives mean [min, max] over seeds, and with
--floor, the share of the gap from the floor's policy (reference) to the upper bound closed by
POLICY, its set limit and the floor limit ("policy_gap_closed", "set_gap_closed",
"floor_gap_closed", from the means). On a node list with nodes in MIG mode (cluster_shapes.py's
`h200-mig`) the upper bound is the plain nodes' plus the most the MIG instances can hold, and the
lower one leaves the slices empty (runtimekit.sim.bound); --floor and --set refuse such a list.
Usage: .venv/bin/python benchmarks/offline_bound.py [--traces DIR[,DIR]] [--lists default,...]
       [--seeds 42-51] [--columns 100,130] [--segments 4] [--gpu-only] [--plans every|first|none]
       [--floor fgd] [--floor-slack 0.05] [--set packfrag]
       [--merge earlier.json] [--jobs 1] [--markdown FILE]
"""

from __future__ import annotations

import json
import multiprocessing
import statistics
import sys
from collections import Counter
from pathlib import Path

from cluster_shapes import list_inputs
from fgd_table import trace_arguments

from runtimekit.sim.arrivals import build_arrivals, shifted_arrivals
from runtimekit.sim.bound import PLANS, bound_columns
from runtimekit.sim.floor_bound import floor_columns, set_columns
from runtimekit.sim.replay import Cluster, replay, target_workload
from runtimekit.sim.runner import parse_seeds

Task = tuple[str, str, int, tuple[int, ...], int, bool, str, str, float, str]


def one(task: Task) -> dict[str, object]:
    traces, name, seed, columns, segments, gpu_only, plans, floor, slack, keep = task
    nodes, pods, second = list_inputs(traces, name)
    arrivals = shifted_arrivals(pods, second, nodes, seed, 1.3) if second else build_arrivals(pods, nodes, seed, 1.3)
    pods = [*pods, *second]
    result = bound_columns(nodes, arrivals, seed, columns, segments, gpu_only, plans)
    cells: dict[str, dict[str, float | int | None]] = {}
    for column, cell in result.columns.items():
        raised = [p.gpu_only_upper - p.upper for p in cell.points if p.gpu_only_upper is not None]
        cells[column] = {
            "upper": round(cell.upper, 3),
            "lower": round(cell.lower, 3),
            "gpu_only_raise_milli": max(raised) if raised else None,
            "whole_unplaced_milli": max(p.whole_arrived - p.whole_placed for p in cell.points),
        }
    cluster, workload = Cluster(nodes), target_workload(pods)
    if floor:
        reference = replay(cluster, arrivals, floor, seed, workload)
        for column, limit in floor_columns(nodes, arrivals.pods, reference.used_milli, columns, slack).items():
            if column in cells:
                # both are upper bounds of the column, so the lower one is too (the floor limit takes
                # the column's last event for all of it, the offline bound cuts the column into runs)
                upper = min(limit.upper, float(cells[column]["upper"] or 0.0))
                cells[column].update(floor_upper=round(upper, 3), floor_column=limit.floor_column)
                cells[column]["reference"] = reference.columns[column]
    if keep:
        policy = replay(cluster, arrivals, keep, seed, workload)
        for column, limit in set_columns(nodes, arrivals.pods, policy.placed, columns).items():
            if column in cells:
                upper = min(limit.upper, float(cells[column]["upper"] or 0.0))
                cells[column].update(set_upper=round(upper, 3), policy=policy.columns[column])
                cells[column]["set_adds"] = {k: round(v / 1000, 1) for k, v in limit.added.items()}  # type: ignore[assignment]
    print(f"{name} seed {seed}: {json.dumps(cells)} {result.seconds:.0f} s", file=sys.stderr)
    return {"list": name, "seed": seed, "columns": cells, "seconds": round(result.seconds, 1)}


def summary(rows: list[dict[str, object]], columns: tuple[int, ...]) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name in dict.fromkeys(str(r["list"]) for r in rows):
        out[name] = {}
        for column in map(str, columns):
            cells = [r["columns"][column] for r in rows if r["list"] == name and column in r["columns"]]  # type: ignore[index, operator]
            if not cells:
                continue
            ups = [c["upper"] for c in cells]
            lows = [c["lower"] for c in cells]
            out[name][column] = {
                "upper_mean": round(statistics.fmean(ups), 3),
                "upper_min": min(ups),
                "upper_max": max(ups),
                "lower_mean": round(statistics.fmean(lows), 3),
                "gap_max": round(max(c["upper"] - c["lower"] for c in cells), 3),
            }
            for field in ("floor_upper", "reference", "set_upper", "policy"):
                values = [c[field] for c in cells if c.get(field) is not None]
                if values:
                    out[name][column][f"{field}_mean"] = round(statistics.fmean(values), 3)
            out[name][column].update(gap_closed(out[name][column]))
            adds = [c["set_adds"] for c in cells if "set_adds" in c]
            if adds:
                totals: Counter[str] = sum((Counter(a) for a in adds), Counter())
                out[name][column]["set_adds_mean"] = {  # type: ignore[assignment]
                    k: round(v / len(adds), 1) for k, v in totals.most_common()
                }
    return out


def gap_closed(cell: dict[str, float]) -> dict[str, float]:
    """How much of the gap from the reference (fgd) to the offline bound the policy, its set limit and the
    floor limit each close, from the means over the seeds (only those present)."""
    reference, upper = cell.get("reference_mean"), cell["upper_mean"]
    if reference is None or upper <= reference:
        return {}
    out = {}
    for field, name in (("policy_mean", "policy"), ("set_upper_mean", "set"), ("floor_upper_mean", "floor")):
        if field in cell:
            out[f"{name}_gap_closed"] = round((cell[field] - reference) / (upper - reference), 3)
    return out


def markdown(table: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = [
        "| list | col | upper mean [min, max] | lower (checked packing) mean | largest upper − lower |",
        "|---|---|---|---|---|",
    ]
    for name, by_column in table.items():
        for column, c in by_column.items():
            lines.append(
                f"| {name} | {column} | {c['upper_mean']:.2f} [{c['upper_min']:.2f}, {c['upper_max']:.2f}] | "
                f"{c['lower_mean']:.2f} | {c['gap_max']:.3f} |"
            )
    limits = [(n, col, c) for n, by in table.items() for col, c in by.items() if "floor_upper_mean" in c]
    if limits:
        lines += [
            "",
            "| list | col | reference | floor limit | policy | set limit | offline bound "
            "| gap closed: policy / set limit / floor limit |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, column, c in limits:
            cells = [c.get(f) for f in ("reference_mean", "floor_upper_mean", "policy_mean", "set_upper_mean")]
            text = " | ".join("–" if v is None else f"{v:.2f}" for v in cells)
            shares = [c.get(f"{f}_gap_closed") for f in ("policy", "set", "floor")]
            closed = " / ".join("–" if v is None else f"{100 * v:.0f} %" for v in shares)
            lines.append(f"| {name} | {column} | {text} | {c['upper_mean']:.2f} | {closed} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = trace_arguments((__doc__ or "").splitlines()[0], jobs=1)
    parser.add_argument("--columns", default="100,130")
    parser.add_argument("--segments", type=int, default=4, help="boundary prefixes per column, less one")
    parser.add_argument("--gpu-only", action="store_true", help="also bound without CPU and memory")
    parser.add_argument(
        "--plans",
        default="every",
        choices=PLANS,
        help="where a MILP plan is laid out (the lower bound; see sim/bound.py)",
    )
    parser.add_argument("--floor", default="", help="the floor limit against this policy's replay (fgd)")
    parser.add_argument("--floor-slack", type=float, default=0.05, help="points a policy may fall behind the floor")
    parser.add_argument("--set", default="", dest="keep", help="the set limit of this policy's replay (packfrag)")
    parser.add_argument("--merge", help="also take rows from earlier JSON output(s) of this script, comma-separated")
    args = parser.parse_args()
    columns = tuple(int(c) for c in args.columns.split(","))
    tasks = [
        (
            args.traces,
            name,
            seed,
            columns,
            args.segments,
            args.gpu_only,
            args.plans,
            args.floor,
            args.floor_slack,
            args.keep,
        )
        for name in args.lists.split(",")
        for seed in parse_seeds(args.seeds)
    ]
    earlier = [r for f in (args.merge or "").split(",") if f for r in json.loads(Path(f).read_text())["rows"]]
    merged = list({(r["list"], r["seed"]): r for r in reversed(earlier)}.values())  # the first file wins
    done = {(r["list"], r["seed"]) for r in merged}
    tasks = [t for t in tasks if (t[1], t[2]) not in done]
    if args.jobs > 1:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            rows = list(pool.imap(one, tasks))
    else:
        rows = [one(t) for t in tasks]
    names, wanted = args.lists.split(","), parse_seeds(args.seeds)
    rows = [r for r in [*merged, *rows] if r["list"] in names and r["seed"] in wanted]
    rows.sort(key=lambda r: (names.index(str(r["list"])), r["seed"]))
    table = summary(rows, columns)
    print(json.dumps({"seeds": args.seeds, "tune": 1.3, "columns": columns, "summary": table, "rows": rows}, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
