"""What tolerates a taint: `v1.Toleration.ToleratesTaint`'s cases (`toleration_test.go`) and
kube-scheduler's TaintToleration filter table (`tests/scheduler/kubesem/node_cases.py`)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from runtimekit.kube.semantics.tolerations import tolerated, tolerates, untolerated
from scheduler.kubesem.builders import Json, pod, tolerations_of
from scheduler.kubesem.node_cases import TAINT_FILTER_CASES


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""


TAINT = Taint("foo", "bar", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "tolerates_it"),
    [
        pytest.param(Toleration(), False, id="empty: Equal to an empty value"),
        pytest.param(Toleration(operator="Exists"), True, id="empty key and Exists: every taint"),
        pytest.param(Toleration("foo", "Exists"), True, id="the key, Exists"),
        pytest.param(Toleration("foo", "Equal", "bar"), True, id="the key and value"),
        pytest.param(Toleration("foo", "", "bar"), True, id="an empty operator means Equal"),
        pytest.param(Toleration("foo", "Equal", "baz"), False, id="another value"),
        pytest.param(Toleration("other", "Exists"), False, id="another key"),
        pytest.param(Toleration("foo", "Exists", effect="NoSchedule"), True, id="the effect"),
        pytest.param(Toleration("foo", "Exists", effect="NoExecute"), False, id="another effect"),
        pytest.param(Toleration("foo", "Gt", "bar"), False, id="an unknown operator tolerates nothing"),
    ],
)
def test_tolerates_taint(toleration: Toleration, tolerates_it: bool) -> None:
    assert tolerates(toleration, TAINT) is tolerates_it
    assert tolerated([Toleration("x", "Equal", "y"), toleration], TAINT) is tolerates_it


def test_prefer_no_schedule_taints_never_keep_a_pod_off() -> None:
    assert untolerated([Taint("a", "b", "PreferNoSchedule")], ()) is None
    assert untolerated([Taint("a", "b", "NoExecute")], ()) == Taint("a", "b", "NoExecute")


def _tolerations(items: list[Json]):  # type: ignore[no-untyped-def]
    return tolerations_of(pod(tolerations=items))


@pytest.mark.parametrize(("tolerations", "taints", "fits"), TAINT_FILTER_CASES)
def test_untolerated_taints(tolerations: list[Json], taints: list[tuple[str, str, str]], fits: bool) -> None:
    assert (untolerated([Taint(*t) for t in taints], _tolerations(tolerations)) is None) is fits
