"""`shared_constraints`: a pod's scheduling constraints read once per distinct nodeSelector,
affinity, tolerations and nodeName, shared by the pods made from one template; every spec gives
what `constraints` gives (a malformed one raises each time), and a pending pod's task carries it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runtimekit.kube.semantics.nodeaffinity import SelectorError
from runtimekit.scheduler.cache.objects import constraints, shared_constraints, task_from_pod
from scheduler.fake_api import P, pod_object

NOT_READY = {
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
TERM = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
SPECS: list[dict[str, Any]] = [
    {},
    {"tolerations": [NOT_READY]},
    {"tolerations": [NOT_READY, {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]},
    {"nodeSelector": {"disk": "ssd"}},
    {"nodeSelector": {"disk": "hdd"}},
    {"nodeName": "n1"},
    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [TERM]}}}},
    {"affinity": {"podAffinity": {}}, "nodeSelector": {"disk": "ssd"}, "tolerations": [NOT_READY], "nodeName": "n2"},
]


def test_each_spec_reads_as_constraints_reads_it_and_a_template_shares_one() -> None:
    for spec in SPECS:
        assert shared_constraints(spec) == constraints(spec)
        again = copy.deepcopy(spec)
        again["containers"] = [{"name": "other"}]  # no constraint reads it
        assert shared_constraints(again) is shared_constraints(spec)
    assert len({shared_constraints(spec) for spec in SPECS}) == len(SPECS)


@pytest.mark.parametrize(
    "spec",
    [{"nodeSelector": ["disk"]}, {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": 1}}}],
)
def test_a_malformed_spec_raises_each_time(spec: dict[str, Any]) -> None:
    for _ in range(2):
        with pytest.raises((SelectorError, AttributeError, TypeError, ValueError)):
            shared_constraints(spec)


def test_pending_pods_of_one_template_carry_one_constraints() -> None:
    first, second = pod_object("a", {}), pod_object("b", {})
    for pod in (first, second):
        pod["spec"]["tolerations"] = [NOT_READY]
    one, two = task_from_pod(first, P), task_from_pod(second, P)
    assert one.constraints is two.constraints
    assert one.constraints == constraints(first["spec"])
