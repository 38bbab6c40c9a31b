"""Node scores kept per pod signature (`scorememo.py`, issue 36): a stream of same-signature and mixed
pods through the real framework (predicates, nodeorder, gpushare with packfrag, mig) places every pod
on the same node and GPUs as the full scoring path, each score vector has the same bits, and a pod
of a signature seen before rescores only the rows that changed since."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

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
from runtimekit.scheduler.framework.info import Constraints, JobInfo, JobKey, NodeMeta, Taint, TaskInfo, Toleration
from runtimekit.scheduler.framework.scorememo import ScoreMemo
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.framework.values import Rows, Scores
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.inprocess import FrameworkConfig, build_framework
from runtimekit.scheduler.plugins.gpushare.plugin import GpuSharePlugin
from runtimekit.scheduler.plugins.nodeorder import NodeOrderPlugin

CONF = """\
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: nodeorder
  - name: gpushare
  - name: mig
"""
PREFERRED = {  # preferred node affinity: normalised over the rows scored, so never kept
    "spec": {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]},
                    }
                ]
            }
        }
    }
}


@dataclass(frozen=True)
class Pod:
    cpu: int  # milli
    mem_gib: int
    share: int = 0  # GPU milli of one share, 0 for none
    tolerant: bool = False  # tolerates the PreferNoSchedule taint
    preferred: bool = False  # has preferred node affinity


def cluster(nodes: int, tainted: bool) -> StaticCache:
    entries = []
    for i in range(nodes):
        name = f"node-{i:03d}"
        gpus = 8 if i % 3 else 0
        cpu = 32_000 if gpus else 16_000 + 8_000 * (i % 4)  # GPU nodes alike: packfrag keeps no rare hosts
        taints = (Taint("soft", "", "PreferNoSchedule"),) if tainted and i % 5 == 0 else ()
        entries.append(
            (
                NodeInventory.simulated(name, "H200", gpus),
                NodeCapacity(cpu, (64 + 32 * (i % 3)) << 30, 110),
                NodeMeta(NodeName(name), labels={"tier": "ab"[i % 2]}, taints=taints, gpu_model="H200"),
            )
        )
    return StaticCache(entries)


def submit(cache: StaticCache, pods: Sequence[Pod], start: int) -> None:
    for i, pod in enumerate(pods, start):
        gpus = (ContainerGpuRequest("main", GpuRequest(GpuKind.SHARE, 1, pod.share, 0)),) if pod.share else ()
        request = PodRequest(pod.cpu, pod.mem_gib << 30, gpus)
        tolerations = (Toleration("soft", "Exists", "", "PreferNoSchedule"),) if pod.tolerant else ()
        job = JobInfo(JobKey(f"p{i}"), "default", f"p{i}", created=float(i))
        job.add(
            TaskInfo(
                PodKey(f"default/p{i}"),
                "default",
                f"p{i}",
                job.key,
                request,
                created=float(i),
                pod=PREFERRED if pod.preferred else None,
                constraints=Constraints(tolerations=tolerations),
            )
        )
        cache.add_job(job)


def schedule(
    pods: Sequence[Pod], batch: int, nodes: int = 40, tainted: bool = False, conf: str = CONF
) -> dict[str, object]:
    """Each pod's node and GPU slots after scheduling `pods` in sessions of `batch`."""
    cache = cluster(nodes, tainted)
    framework = build_framework(FrameworkConfig(parse_conf(conf), seed=1, explain=False))
    for start in range(0, len(pods), batch):
        submit(cache, pods[start : start + batch], start)
        framework.run_once(cache)
    placed: dict[str, object] = {}
    for key, task in sorted(cache.bound.items()):
        assert task.placement is not None
        placed[str(key)] = (task.node, task.placement.slots)
    placed["unplaced"] = sorted(str(k) for k in cache.unschedulable)
    return placed


@contextmanager
def full_scoring(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Sessions score every feasible row of every pod, as before scores were kept."""
    with monkeypatch.context() as patch:
        patch.setattr(Session, "node_order", Session._summed)
        yield


@contextmanager
def checked_scoring(monkeypatch: pytest.MonkeyPatch, compared: list[int]) -> Iterator[None]:
    """Sessions score through the memo, and each answer is checked bit for bit against a full call."""
    kept = Session.node_order

    def node_order(self: Session, task: TaskInfo, rows: Rows) -> Scores:
        scores = kept(self, task, rows)
        full = self._summed(task, rows)
        assert scores.dtype == full.dtype
        assert scores.tobytes() == full.tobytes(), task.key
        compared.append(int(rows.size))
        return scores

    with monkeypatch.context() as patch:
        patch.setattr(Session, "node_order", node_order)
        yield


SAME = [Pod(500, 2)] * 20
MIXED = [
    Pod([500, 1000, 2000][i % 3], 1 + i % 4, [0, 250, 500, 0][i % 4], tolerant=i % 5 == 0, preferred=i % 11 == 0)
    for i in range(40)
]


@pytest.mark.parametrize("pods", [SAME, MIXED, SAME + MIXED + SAME], ids=["same", "mixed", "runs"])
@pytest.mark.parametrize("tainted", [False, True])
def test_kept_scores_place_as_full_scoring(monkeypatch: pytest.MonkeyPatch, pods: list[Pod], tainted: bool) -> None:
    with full_scoring(monkeypatch):
        before = schedule(pods, 25, tainted=tainted)
    compared: list[int] = []
    with checked_scoring(monkeypatch, compared):
        after = schedule(pods, 25, tainted=tainted)
    assert after == before
    assert len(compared) >= len(pods) - 3  # (a pod that fits one node only is not scored)
    assert schedule(pods, 25, tainted=tainted) == before


def rows_scored(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows each nodeorder call scores, call after call (nodeorder still scores them)."""
    scored: list[int] = []
    kept = NodeOrderPlugin.node_order

    def node_order(self: NodeOrderPlugin, task: TaskInfo, rows: Rows, ssn: SessionView) -> Scores:
        scored.append(int(rows.size))
        return kept(self, task, rows, ssn)

    monkeypatch.setattr(NodeOrderPlugin, "node_order", node_order)
    return scored


def test_same_signature_rescores_only_the_rows_that_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    scored = rows_scored(monkeypatch)
    placed = schedule([Pod(500, 2)] * 20 + [Pod(700, 3)] * 10, batch=30)
    assert len(placed) == 31
    # the first pod of each signature scores the 40 nodes, and so does a pod scored right after
    # packfrag relearned its workload (after 1, 2, 4, 8, 16 pods: new scores everywhere); each other
    # pod only the row the last placement changed
    assert scored == [40 if i in (0, 1, 3, 7, 15, 20) else 1 for i in range(30)]


def test_a_lone_scorer_that_keeps_its_own_row_scores_is_called_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    """gpushare alone (packfrag keeps its scores per shape and row version): no memo over it, and the
    same placements as through the memo; beside nodeorder the memo keeps the sum."""
    lone = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n  - name: gpushare\n'
    pods = SAME + MIXED + SAME
    memo_calls: list[int] = []
    kept = ScoreMemo.scores

    def counted(self: ScoreMemo, *args: object, **kwargs: object) -> Scores:
        memo_calls.append(1)
        return kept(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ScoreMemo, "scores", counted)
    direct = schedule(pods, 25, conf=lone)
    assert memo_calls == []
    with monkeypatch.context() as patch:
        patch.setattr(GpuSharePlugin, "keeps_row_scores", lambda self: False)
        through_memo = schedule(pods, 25, conf=lone)
    assert len(memo_calls) > len(pods) // 2
    assert through_memo == direct
    memo_calls.clear()
    schedule(pods, 25)  # nodeorder beside it
    assert len(memo_calls) > len(pods) // 2


def test_pods_scored_against_other_pods_keep_the_full_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Preferred node affinity (normalised over the rows) and untolerated soft taints on some node
    (normalised too) are scored over every feasible row, pod after pod."""
    scored = rows_scored(monkeypatch)
    schedule([Pod(500, 2, preferred=True)] * 5, batch=5)
    schedule([Pod(500, 2)] * 5, batch=5, tainted=True)
    assert scored == [40] * 10
    scored.clear()
    schedule([Pod(500, 2, tolerant=True)] * 5, batch=5, tainted=True)  # tolerated: every row scores 100
    assert scored == [40, 40, 1, 40, 1]  # (all 40 after packfrag's relearns, as above)


pod_strategy = st.builds(
    Pod,
    cpu=st.sampled_from([250, 500, 4000]),
    mem_gib=st.sampled_from([1, 8]),
    share=st.sampled_from([0, 0, 300, 700]),
    tolerant=st.booleans(),
    preferred=st.sampled_from([False, False, False, True]),
)


@settings(max_examples=10, deadline=None)
@given(
    pods=st.lists(st.tuples(pod_strategy, st.integers(1, 5)), min_size=1, max_size=6),
    batch=st.sampled_from([3, 10, 50]),
    tainted=st.booleans(),
)
def test_kept_scores_place_as_full_scoring_for_any_stream(
    pods: list[tuple[Pod, int]], batch: int, tainted: bool
) -> None:
    stream = [pod for pod, repeat in pods for _ in range(repeat)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Session, "node_order", Session._summed)
        before = schedule(stream, batch, nodes=10, tainted=tainted)
    assert schedule(stream, batch, nodes=10, tainted=tainted) == before
