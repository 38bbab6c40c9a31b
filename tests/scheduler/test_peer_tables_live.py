"""Volcano's and HAMi's own scheduler test cases, end to end on the embedded API server (live_tables.py):
each row's objects created over HTTP, the live scheduler run on its conf until the cluster settles,
and the binds, evictions, PodGroup phases and reasons compared with the peer's expectation. The
whole set is e2e (about 1.5 s a row); one row of each kind runs in the default suite.
scripts/peer_tables.py runs the same rows and prints the agreement per table."""

from __future__ import annotations

import pytest

from runtimekit.cluster.apiserver import ApiServer
from scheduler.hami_rows import rows as hami_rows
from scheduler.live_tables import Row, run_live
from scheduler.volcano_rows import rows as volcano_rows

ROWS = [*volcano_rows(), *hami_rows()]
FAST = {
    "preempt enough tasks to fit large task of different job",
    "sort reclaimees when reclaiming from overusing queue",
}


def check(apiserver: ApiServer, row: Row) -> None:
    got = run_live(apiserver, row.case, row.protocol, later=row.later)
    assert not row.lost(got), f"evicted what {row.table} keeps running: {row.lost(got)}"
    assert not row.disagreement(got), row.disagreement(got)


@pytest.mark.e2e
@pytest.mark.parametrize("row", [pytest.param(r, id=f"{r.table}: {r.name}") for r in ROWS if r.name not in FAST])
def test_peer_rows_agree_end_to_end(apiserver: ApiServer, row: Row) -> None:
    check(apiserver, row)


@pytest.mark.parametrize("row", [pytest.param(r, id=f"{r.table}: {r.name}") for r in ROWS if r.name in FAST])
def test_peer_rows_agree_end_to_end_fast_subset(apiserver: ApiServer, row: Row) -> None:
    check(apiserver, row)
