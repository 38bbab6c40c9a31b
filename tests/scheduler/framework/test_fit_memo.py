"""Feasible rows kept per pod signature (`fitmemo.py`) and kept from session to session with the score
memo (`rowmemos.py`), issue 36: streams of GPU-share pods through the real
framework (predicates, gpushare with fgd learning its workload) place every pod on the same node and
GPUs, and explain every pod that fits nowhere with the same reasons, as the full path; each pod's
feasible rows and score vector are the full path's, bit for bit; and a pod checks only the rows that
changed since the last pod of its signature, in its session or an earlier one."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtimekit.model import (
    ContainerGpuRequest,
    GpuKind,
    GpuRequest,
    NodeCapacity,
    NodeInventory,
    NodeName,
    PodKey,
    PodRequest,
)
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.framework.info import JobInfo, JobKey, NodeMeta, TaskInfo
from runtimekit.scheduler.framework.rowmemos import RowMemos
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.framework.status import FitErrors
from runtimekit.scheduler.framework.values import Rows, Scores, Verdict
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.inprocess import FrameworkConfig, build_framework
from runtimekit.scheduler.plugins.gpushare.plugin import GpuSharePlugin

CONF = """\
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: gpushare
    arguments: {gpushare.policy: fgd}
"""


@dataclass(frozen=True)
class Pod:
    cpu: int  # milli
    share: int = 0  # GPU milli of one share (memory in proportion), 0 for none
    gpus: int = 1  # shares of `share` on that many GPUs


def cluster(nodes: int) -> StaticCache:
    entries = []
    for i in range(nodes):
        name = f"node-{i:03d}"
        gpus = 4 if i % 4 else 0
        entries.append(
            (
                NodeInventory.simulated(name, "H200", gpus),
                NodeCapacity(16_000 + 8_000 * (i % 3), 64 << 30, 20),
                NodeMeta(NodeName(name), gpu_model="H200"),
            )
        )
    return StaticCache(entries)


def submit(cache: StaticCache, pods: Sequence[Pod], start: int) -> None:
    for i, pod in enumerate(pods, start):
        gpu = GpuRequest(GpuKind.SHARE, pod.gpus, pod.share, None)
        request = PodRequest(pod.cpu, 1 << 30, (ContainerGpuRequest("main", gpu),) if pod.share else ())
        job = JobInfo(JobKey(f"p{i}"), "default", f"p{i}", created=float(i))
        job.add(TaskInfo(PodKey(f"default/p{i}"), "default", f"p{i}", job.key, request, created=float(i)))
        cache.add_job(job)


def schedule(pods: Sequence[Pod], batch: int, nodes: int = 24) -> dict[str, object]:
    """Each pod's node and GPU slots, and why each unplaced pod fits nowhere, after scheduling `pods`
    in sessions of `batch`."""
    cache = cluster(nodes)
    framework = build_framework(FrameworkConfig(parse_conf(CONF), seed=1, explain=True))
    for start in range(0, len(pods), batch):
        submit(cache, pods[start : start + batch], start)
        framework.run_once(cache)
    placed: dict[str, object] = {}
    for key, task in sorted(cache.bound.items()):
        assert task.placement is not None
        placed[str(key)] = (task.node, task.placement.slots)
    placed["unplaced"] = sorted((str(k), errors.message) for k, errors in cache.unschedulable.items())
    return placed


@contextmanager
def full_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Sessions check and score every row for every pod, as before anything was kept."""
    with monkeypatch.context() as patch:
        patch.setattr(Session, "_select_feasible", Session.feasible)
        patch.setattr(Session, "node_order", Session._summed)
        yield


@contextmanager
def checked(monkeypatch: pytest.MonkeyPatch, compared: list[tuple[int, int]]) -> Iterator[None]:
    """Sessions go through the memos, and each answer is checked against the full path: the same
    feasible rows (the same node count, and the same reasons when none), the same score bits."""
    kept_fit, kept_scores = Session._select_feasible, Session.node_order

    def select_feasible(self: Session, task: TaskInfo) -> tuple[Rows, FitErrors]:
        rows, errors = kept_fit(self, task)
        full_rows, full_errors = self.feasible(task)
        assert rows.tolist() == full_rows.tolist(), task.key
        assert errors.nodes == full_errors.nodes
        if rows.size == 0:
            assert errors.message == full_errors.message
        compared.append((0, int(rows.size)))
        return rows, errors

    def node_order(self: Session, task: TaskInfo, rows: Rows) -> Scores:
        scores = kept_scores(self, task, rows)
        full = self._summed(task, rows)
        assert scores.dtype == full.dtype
        assert scores.tobytes() == full.tobytes(), task.key
        compared.append((1, int(rows.size)))
        return scores

    with monkeypatch.context() as patch:
        patch.setattr(Session, "_select_feasible", select_feasible)
        patch.setattr(Session, "node_order", node_order)
        yield


SAME = [Pod(2000, 300)] * 30
MIXED = [Pod([1000, 2000, 4000][i % 3], [0, 250, 500, 700, 1000][i % 5], 1 + (i % 7 == 0)) for i in range(60)]
FILLING = [Pod(4000, 600)] * 80 + MIXED  # fills the cluster: later pods fit nowhere


@pytest.mark.parametrize("pods", [SAME, MIXED, FILLING], ids=["same", "mixed", "filling"])
@pytest.mark.parametrize("batch", [7, 200])
def test_kept_rows_and_scores_place_as_the_full_path(
    monkeypatch: pytest.MonkeyPatch, pods: list[Pod], batch: int
) -> None:
    with full_path(monkeypatch):
        before = schedule(pods, batch)
    compared: list[tuple[int, int]] = []
    with checked(monkeypatch, compared):
        after = schedule(pods, batch)
    assert after == before
    assert sum(1 for kind, _ in compared if kind == 0) >= len(pods)  # (unplaced pods are tried again)
    assert (
        sum(1 for kind, _ in compared if kind == 1) >= len(pods) // 2
    )  # (a pod that fits one node only is not scored)
    assert schedule(pods, batch) == before


def test_kept_rows_across_a_relearned_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    """fgd learns its workload again after 256 pods; a mix that drifted by then changes every score:
    the placements stay the full path's through it."""
    drifting = [Pod(2000, 300)] * 200 + [Pod([1000, 4000][i % 2], [200, 500][i % 2]) for i in range(100)]
    with full_path(monkeypatch):
        before = schedule(drifting, 50, nodes=48)
    compared: list[tuple[int, int]] = []
    with checked(monkeypatch, compared):
        assert schedule(drifting, 50, nodes=48) == before
    assert sum(1 for kind, _ in compared if kind == 1) > 256


def test_filling_stream_explains_unplaced_pods() -> None:
    placed = schedule(FILLING, 200)
    unplaced = placed["unplaced"]
    assert isinstance(unplaced, list)
    assert unplaced
    assert all("nodes are available" in message for _, message in unplaced)


def rows_checked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows each gpushare predicate call checks, call after call."""
    checked_rows: list[int] = []
    kept = GpuSharePlugin.predicate

    def predicate(self: GpuSharePlugin, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        checked_rows.append(int(rows.size))
        return kept(self, task, rows, ssn)

    monkeypatch.setattr(GpuSharePlugin, "predicate", predicate)
    return checked_rows


def test_same_signature_checks_only_the_rows_that_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    checked_rows = rows_checked(monkeypatch)
    placed = schedule([Pod(2000, 300)] * 6 + [Pod(1000, 500)] * 3 + [Pod(2000, 300)] * 3, batch=4)
    between = {placed[f"default/p{i}"][0] for i in (6, 7, 8)}  # type: ignore[index]
    # the first pod of each signature checks the 24 nodes (all pass the resource fit); each other
    # pod only the row the last placement changed, in its session or the one before; a signature
    # seen again after three placements of another, the rows those changed
    assert checked_rows == [24, 1, 1, 1, 1, 1, 24, 1, 1, len(between), 1, 1]


def test_memos_start_afresh_when_node_capacities_change() -> None:
    cache = cluster(8)
    memos = RowMemos()
    first = memos.open(cache.snapshot())
    fits, scores = first.fits, first.scores
    assert memos.open(cache.snapshot()).fits is fits  # the same nodes: kept
    snapshot = cache.snapshot()
    snapshot.table.cpu_total = snapshot.table.cpu_total.copy()
    snapshot.table.cpu_total[3] += 1000
    memos.open(snapshot)
    assert memos.fits is not fits
    assert memos.scores is not scores
    fits = memos.fits
    snapshot = cache.snapshot()
    snapshot.meta_version += 1
    assert memos.open(snapshot).fits is not fits


pod_strategy = st.builds(
    Pod,
    cpu=st.sampled_from([500, 4000, 12000]),
    share=st.sampled_from([0, 100, 300, 700, 1000]),
    gpus=st.sampled_from([1, 1, 2]),
)


@settings(max_examples=12, deadline=None)
@given(
    pods=st.lists(st.tuples(pod_strategy, st.integers(1, 8)), min_size=1, max_size=8),
    batch=st.sampled_from([3, 10, 50]),
)
def test_kept_rows_place_as_the_full_path_for_any_stream(pods: list[tuple[Pod, int]], batch: int) -> None:
    stream = [pod for pod, repeat in pods for _ in range(repeat)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Session, "_select_feasible", Session.feasible)
        patch.setattr(Session, "node_order", Session._summed)
        before = schedule(stream, batch, nodes=10)
    assert schedule(stream, batch, nodes=10) == before


def test_kept_rows_are_ascending_and_the_candidates_themselves_when_all_pass() -> None:
    cache = cluster(8)
    submit(cache, [Pod(1000)], 0)
    framework = build_framework(FrameworkConfig(parse_conf(CONF), seed=1))
    ssn = framework.open_session(cache)
    task = next(iter(next(iter(ssn.jobs.values())).tasks.values()))
    rows, _ = ssn._select_feasible(task)
    assert rows is ssn.candidate_rows()  # views stay possible downstream
    again, _ = ssn._select_feasible(task)
    assert again is ssn.candidate_rows()
    assert np.all(np.diff(rows) > 0)
    framework.close_session(ssn)
