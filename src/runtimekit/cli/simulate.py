"""`runtimekit simulate`: replay a cluster trace through the scheduler (docs/simulator.md)."""

from __future__ import annotations

import argparse
import sys

from runtimekit.model.trace import TraceError
from runtimekit.scheduler.policies import DEFAULT_POLICY
from runtimekit.sim.claims import DraPublication
from runtimekit.sim.replay import ReplayResult
from runtimekit.sim.runner import (
    DEFAULT_NODES,
    DEFAULT_PODS,
    SimulationReport,
    SimulationSpec,
    bundled,
    expected_events,
    load_inputs,
    parse_seeds,
    run_simulation,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", help="node list CSV (default: the bundled openb GPU node list)")
    parser.add_argument("--pods", help="pod list CSV (default: the bundled openb default pod list)")
    parser.add_argument(
        "--policy",
        default=DEFAULT_POLICY,
        help=f"placement policies, comma-separated (default {DEFAULT_POLICY}); 'paper' = the six "
        "policies of the FGD paper",
    )
    parser.add_argument("--seeds", default="42-51", help="seeds: 42-51, or 42,43 (default 42-51)")
    parser.add_argument("--tune", type=float, default=1.3, help="arrivals as a share of GPU capacity (default 1.3)")
    parser.add_argument("--json", dest="json_out", help="write the results as JSON")
    parser.add_argument("--csv", dest="csv_out", help="write every allocation column as CSV")
    parser.add_argument("--plot", dest="plot_out", help="write allocation against arrivals as PNG")
    parser.add_argument("--jobs", type=positive_count, default=1, help="worker processes (default 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--bound",
        nargs="?",
        const=DEFAULT_BOUND_COLUMNS,
        default="",
        metavar="COLUMNS",
        help="also bound the offline optimum at these columns (default when given alone: "
        f"{DEFAULT_BOUND_COLUMNS}); about half a minute per column and seed",
    )
    parser.add_argument(
        "--through-claims",
        action="store_true",
        help="every pod asks for its GPUs through a ResourceClaim of the kit's DRA driver, the nodes publish "
        "their GPUs as its ResourceSlices, and the dynamicresources plugin allocates them (much slower)",
    )


DEFAULT_BOUND_COLUMNS = "50,60,70,80,90,100,110,120,130"


def positive_count(text: str) -> int:
    """argparse type of a count of at least 1 (`--jobs 0` would run nothing and report nothing)."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return int(text)


def parse_columns(text: str) -> tuple[int, ...]:
    """`100,130` or a range `90-100` (columns 0..130); empty: none."""
    columns: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        low, dash, high = part.partition("-")
        if not (low.isdigit() and (not dash or high.isdigit())):
            raise ValueError(f"bound columns must look like 100,130 or 90-100; got {text!r}")
        columns.extend(range(int(low), int(high) + 1) if dash else [int(low)])
    return tuple(dict.fromkeys(columns))


def _policies(text: str) -> tuple[str, ...]:
    from runtimekit.sim.runner import PAPER_POLICIES

    names: list[str] = []
    for part in (p.strip().lower() for p in text.split(",") if p.strip()):
        names.extend(PAPER_POLICIES if part == "paper" else [part])
    return tuple(dict.fromkeys(names))


def _claims(through_claims: bool) -> DraPublication | None:
    if not through_claims:
        return None
    from runtimekit.cli.sim_dra import kit_publication

    return kit_publication()


def run(args: argparse.Namespace) -> int:
    from runtimekit.base.files import write_atomic
    from runtimekit.sim.report import plot, render_table, report_csv, report_json

    try:
        spec = SimulationSpec(
            args.nodes or str(bundled(DEFAULT_NODES)),
            args.pods or str(bundled(DEFAULT_PODS)),
            _policies(args.policy),
            parse_seeds(args.seeds),
            args.tune,
            parse_columns(args.bound),
            _claims(args.through_claims),
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        report = _run_with_progress(spec, args.jobs, quiet=args.quiet)
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for warning in report.warnings[:20]:
        print(f"warning: {warning}", file=sys.stderr)
    if len(report.warnings) > 20:
        print(f"warning: ... and {len(report.warnings) - 20} more", file=sys.stderr)
    if args.json_out:
        write_atomic(args.json_out, report_json(report))
    if args.csv_out:
        write_atomic(args.csv_out, report_csv(report.results))
    if args.plot_out:
        title = f"{spec.pods_file.rsplit('/', 1)[-1]}, tune {spec.tune}"
        plot(report.results, args.plot_out, title=title, bounds=report.bounds)
    sys.stdout.write(render_table(report.results, bounds=report.bounds))
    print(f"{len(report.results)} runs in {report.seconds:.1f} s")
    return 0


def _run_with_progress(spec: SimulationSpec, jobs: int, quiet: bool) -> SimulationReport:
    if quiet or not sys.stderr.isatty():
        return run_simulation(spec, jobs)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    nodes, pods, _ = load_inputs(spec)
    per_run = expected_events(spec, pods, nodes)
    runs = len(spec.seeds) * len(spec.policies)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        transient=True,
    ) as progress:
        task = progress.add_task(f"simulating {runs} runs", total=runs * per_run)
        done_runs = 0

        def on_result(result: ReplayResult) -> None:
            nonlocal done_runs
            done_runs += 1
            completed = done_runs * per_run
            progress.update(
                task,
                completed=completed,
                description=f"{done_runs}/{runs} runs ({result.policy} seed {result.seed} done)",
            )

        def on_events(count: int) -> None:
            progress.advance(task, count)

        return run_simulation(spec, jobs, on_result=on_result, on_events=on_events if jobs <= 1 else None)
