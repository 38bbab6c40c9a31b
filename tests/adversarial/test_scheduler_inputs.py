"""Hostile and broken pods against the live scheduler: each fails alone with a reason on the pod, and
the session goes on for everyone else — nothing a pod's author writes wedges the scheduler.

Each pod is created next to an ordinary one; both go through one scheduling session."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.interfaces import Plugin, Predicate, Rows, Verdict
from runtimekit.scheduler.framework.view import SessionView
from scheduler.fake_api import FakeApi, P, node_object, pod_object
from scheduler.test_live_cache import make, schedule

GPU, CORE, MEM = P.resources.gpu, P.resources.core, P.resources.memory
SELECTOR_TERMS = "requiredDuringSchedulingIgnoredDuringExecution"


def hostile(name: str, limits: Mapping[str, Any], cpu: str = "1", **spec: Any) -> dict[str, Any]:
    pod = pod_object(name, limits, cpu=cpu)
    pod["spec"].update(spec)
    return pod


HOSTILE = [
    pytest.param(hostile("x", {GPU: "1e30"}), "aliyun.com/gpu of 1e30 is beyond any node", id="whole GPUs 1e30"),
    pytest.param(hostile("x", {CORE: "1e30"}), "beyond any node", id="core percent 1e30"),
    pytest.param(hostile("x", {MEM: "1e30"}), "beyond any node", id="memory units 1e30"),
    pytest.param(hostile("x", {}, cpu="1e30"), "cpu or memory beyond any node", id="cpu 1e30"),
    pytest.param(hostile("x", {"example.com/foo": "1e30"}), "beyond any node", id="extended resource 1e30"),
    pytest.param(hostile("x", {GPU: "-1"}), "must not be negative", id="negative GPUs"),
    pytest.param(hostile("x", {CORE: "abc"}), "must be a whole number", id="not a quantity"),
    pytest.param(hostile("x", {CORE: 10}, nodeSelector=["zone-a"]), "invalid spec", id="nodeSelector a list"),
    pytest.param(
        hostile("x", {CORE: 10}, affinity={"nodeAffinity": {SELECTOR_TERMS: {"nodeSelectorTerms": ["bad"]}}}),
        "invalid spec",
        id="affinity terms not objects",
    ),
    pytest.param(hostile("x", {CORE: 10}, affinity="near"), "invalid spec", id="affinity a string"),
]


@pytest.mark.parametrize(("pod", "reason"), HOSTILE)
def test_a_hostile_pod_fails_alone_with_a_reason(pod: dict[str, Any], reason: str) -> None:
    api = FakeApi()
    api.add_node(node_object("n1"))
    live, framework = make(api)
    api.add_pod(pod)
    api.add_pod(pod_object("ordinary", {CORE: 20}))
    schedule(live, framework, 1)
    assert api.pods["default/ordinary"]["spec"]["nodeName"] == "n1"
    assert "nodeName" not in api.pods["default/x"]["spec"]
    events = [message for name, kind, message in api.events if name == "x" and kind == "FailedScheduling"]
    assert events, "no event on the hostile pod"
    assert reason in events[-1]
    # and nothing is left behind: after it is gone, a pod that needs the whole GPU still fits
    api.delete_pod("default/x")
    api.add_pod(pod_object("after", {GPU: 1}))
    schedule(live, framework, 1)
    assert api.pods["default/after"]["spec"]["nodeName"] == "n1"


class Bomb(Plugin, Predicate):
    """A plugin with a bug that only one pod meets."""

    name = "bomb"

    def predicate(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        if task.name == "trigger":
            raise OverflowError("Python int too large to convert to C long")
        return Verdict.all(rows.size)


@pytest.mark.parametrize("actions", ["allocate", "allocate, backfill", "enqueue, allocate, backfill, preempt"])
def test_a_plugin_that_fails_for_one_pod_fails_that_pod_alone(actions: str) -> None:
    api = FakeApi()
    api.add_node(node_object("n1"))
    live, _ = make(api)
    registry = builtin_registry()
    registry.register_plugin("bomb", lambda args, ctx: Bomb())
    conf = f'actions: "{actions}"\ntiers:\n- plugins:\n  - name: priority\n  - name: bomb\n  - name: gpushare\n'
    framework = Framework(parse_conf(conf), registry, BuildContext(protocol=P))
    for name in ("before", "trigger", "after"):
        api.add_pod(pod_object(name, {CORE: 20}, priority=1 if name == "trigger" else 0))
    schedule(live, framework, 1)
    placed: Sequence[str] = sorted(k for k, p in api.pods.items() if p["spec"].get("nodeName"))
    assert placed == ["default/after", "default/before"]
    (message,) = [m for name, kind, m in api.events if name == "trigger" and kind == "FailedScheduling"]
    assert message == "allocate: internal error: OverflowError: Python int too large to convert to C long"
    assert np.isfinite(live.cache.ledger.table.cpu_free).all()


@pytest.mark.parametrize("text", ["1e999999999", "1E-999999999", "5e41"])
def test_a_quantity_with_a_huge_exponent_is_refused_at_once(text: str) -> None:
    """Parsing such a quantity exactly would hang the scheduler (10**999999999 as a Fraction)."""
    from runtimekit.kube.semantics.quantity import parse_quantity

    with pytest.raises(ValueError, match="out of range"):
        parse_quantity(text)
