"""Merge better_than_fgd.py runs of one seed each into the rows of one run over all their seeds.

On a shared machine each list and seed is best replayed in a process of its own (a run that stops
keeps what it finished, and another seed is added later). A run's JSON keeps, per column, only the
mean, min and max over its seeds, so runs over several seeds cannot be merged; runs of one seed
can: their paired differences are the per-seed values. This script reads such JSONs (any number,
any lists; a later file's (list, seed) replaces an earlier one's) and prints better_than_fgd.py's
JSON for the lists and seeds asked, each list over the seeds it has of those: per column and policy
the mean, min and max over the seeds, the paired difference from fgd likewise, the worst column,
and the time ratio as the mean of the seeds' ratios (a run keeps no seconds). Feed it back as
`better_than_fgd.py --rows MERGED.json` (with `--bounds` for the gap closed, `--markdown` for the
table). A list with none of the seeds asked is left out (stderr says so).
Usage: .venv/bin/python benchmarks/seed_rows.py --policy packfrag --seeds 42-51 --lists a,b RUN.json ...
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from better_than_fgd import list_row

from runtimekit.sim.runner import parse_seeds

COLUMNS = tuple(str(c) for c in range(50, 131))


def per_seed(paths: list[str]) -> dict[tuple[str, int], dict[str, Any]]:
    """Each (list, seed) row of one-seed runs; a run over several seeds is refused."""
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for path in paths:
        run = json.loads(Path(path).read_text())
        seeds = parse_seeds(str(run["seeds"]))
        if len(seeds) != 1:
            raise SystemExit(f"{path}: a run over seeds {run['seeds']}: only runs of one seed can be merged")
        for row in run["rows"]:
            found[(row["list"], seeds[0])] = row
    return found


def spread(values: list[float], digits: int) -> dict[str, float]:
    return {"mean": round(statistics.fmean(values), digits), "min": round(min(values), 2), "max": round(max(values), 2)}


def merge(rows: list[dict[str, Any]], name: str, policy: str) -> dict[str, Any]:
    """One list's row over its seeds' rows, in better_than_fgd.compare's format."""
    cells = {
        p: {
            c: spread([r["cells"][p][c]["mean"] for r in rows], 3)
            for c in COLUMNS
            if all(c in r["cells"][p] for r in rows)
        }
        for p in ("fgd", policy)
    }
    deltas = {
        c: spread([r["delta"][c]["mean"] for r in rows], 3) for c in COLUMNS if all(c in r["delta"] for r in rows)
    }
    row = list_row(name, cells, deltas, round(statistics.fmean(r["time_ratio"] for r in rows), 2))
    return {**row, "seeds": sorted(r["_seed"] for r in rows)}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("runs", nargs="+", help="better_than_fgd.py JSONs, one seed each")
    parser.add_argument("--lists", required=True)
    parser.add_argument("--seeds", required=True)
    parser.add_argument("--policy", default="packfrag")
    args = parser.parse_args()
    found = per_seed(args.runs)
    out = []
    for name in args.lists.split(","):
        rows = [{**found[(name, s)], "_seed": s} for s in parse_seeds(args.seeds) if (name, s) in found]
        if not rows:
            print(f"{name}: no run of the seeds asked", file=sys.stderr)
            continue
        out.append(merge(rows, name, args.policy))
    print(json.dumps({"policy": args.policy, "seeds": args.seeds, "rows": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
