"""Run Volcano's and HAMi's own scheduler test cases (translated as data under tests/scheduler) end to
end on the embedded API server, each case on a fresh server with the live scheduler, and print JSON:
agreement per table and overall, each disagreeing case with the reason, the pods evicted that the
peer keeps running (`lost`), and the cases using what the kit does not have, counted apart.

    PYTHONPATH=src python scripts/peer_tables.py [--only SUBSTRING] [--table PREFIX]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from runtimekit.cluster.apiserver import ApiServer  # noqa: E402
from scheduler import volcano_more_rows  # noqa: E402
from scheduler.hami_rows import MISSING as HAMI_MISSING  # noqa: E402
from scheduler.hami_rows import rows as hami_rows  # noqa: E402
from scheduler.live_tables import Row, run_live  # noqa: E402
from scheduler.volcano_rows import rows as volcano_rows  # noqa: E402


def run(row: Row) -> dict[str, Any]:
    server = ApiServer(bookmark_interval=0.2, seed=1234).start()
    try:
        got = run_live(server, row.case, row.protocol, later=row.later)
    except Exception as exc:  # a case that cannot run disagrees, saying why
        return {"case": row.name, "why": f"error: {exc!r}", "lost": []}
    finally:
        server.close()
    return {"case": row.name, "why": row.disagreement(got), "lost": row.lost(got), "seconds": round(got.seconds, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--table", default="", help="run the tables whose name starts with this")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    tables: dict[str, dict[str, Any]] = {}
    for row in [*volcano_rows(), *hami_rows()]:
        if args.only not in row.name or not row.table.startswith(args.table):
            continue
        table = tables.setdefault(row.table, {"cases": 0, "agree": 0, "disagree": [], "lost": [], "missing": []})
        result = run(row)
        table["cases"] += 1
        if result["why"]:
            table["disagree"].append({"case": row.name, "why": result["why"]})
        else:
            table["agree"] += 1
        if result["lost"]:
            table["lost"].append({"case": row.name, "pods": result["lost"]})
    for name, test, count, reason in [*volcano_more_rows.MISSING, *HAMI_MISSING]:
        if name.startswith(args.table) and not args.only:
            table = tables.setdefault(name, {"cases": 0, "agree": 0, "disagree": [], "lost": [], "missing": []})
            table["missing"].append({"test": test, "cases": count, "reason": reason})
    for table in tables.values():
        table["agreement"] = round(table["agree"] / table["cases"], 3) if table["cases"] else None
    cases = sum(t["cases"] for t in tables.values())
    agree = sum(t["agree"] for t in tables.values())
    overall = {
        "cases": cases,
        "agree": agree,
        "agreement": round(agree / cases, 3) if cases else None,
        "lost_cases": sum(len(t["lost"]) for t in tables.values()),
        "missing_cases": sum(m["cases"] for t in tables.values() for m in t["missing"]),
    }
    print(json.dumps({"overall": overall, "tables": tables}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
