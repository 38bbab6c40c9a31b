"""`runtimekit demo`: what `make demo` runs — the trace simulator on the bundled openb default
list with fgd, bestfit and random, so a newcomer sees the kit's scheduling policies at work."""

from __future__ import annotations

import argparse

from runtimekit.cli import simulate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", default="42-43", help="seeds for the simulation part (default 42-43)")
    parser.add_argument("--out", default="out/demo", help="folder for the JSON and the plot (default out/demo)")


def run(args: argparse.Namespace) -> int:
    print("== Trace replay: openb default pod list on 1213 GPU nodes (6212 GPUs), tune 1.3")
    sim_args = argparse.Namespace(
        nodes=None,
        pods=None,
        policy="fgd,bestfit,random",
        seeds=args.seeds,
        tune=1.3,
        json_out=f"{args.out}/simulate.json",
        csv_out=None,
        plot_out=f"{args.out}/allocation.png",
        jobs=2,
        quiet=False,
    )
    code = simulate.run(sim_args)
    if code == 0:
        print(f"results: {args.out}/simulate.json, plot: {args.out}/allocation.png")
    return code
