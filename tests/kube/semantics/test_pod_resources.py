"""Kubernetes' pod resource formula (`resource.PodRequests`), generic in the amounts: the cases of
`resource/helpers_test.go` with sidecars (restartable init containers) and overhead."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.kube.semantics.resources import is_sidecar, pod_amounts


def container(cpu: int, sidecar: bool = False) -> dict[str, Any]:
    return {"cpu": cpu, **({"restartPolicy": "Always"} if sidecar else {})}


def requests(app: list[int], init: list[tuple[int, bool]], overhead: int | None = None) -> int:
    return pod_amounts(
        [container(c) for c in app],
        [container(c, s) for c, s in init],
        lambda c: int(c["cpu"]),  # type: ignore[typeddict-item]
        lambda a, b: a + b,
        max,
        0,
        overhead=overhead,
    )


@pytest.mark.parametrize(
    ("app", "init", "overhead", "want"),
    [
        pytest.param([1, 2], [], None, 3, id="app containers summed"),
        pytest.param([1], [(5, False), (2, False)], None, 5, id="the largest init container wins"),
        pytest.param([4], [(3, False)], None, 4, id="app containers win"),
        pytest.param([1], [(2, True)], None, 3, id="a sidecar runs beside the app containers"),
        pytest.param([1], [(2, True), (4, False)], None, 6, id="an init container after a sidecar runs with it"),
        pytest.param([1], [(4, False), (2, True)], None, 4, id="an init container before a sidecar runs alone"),
        pytest.param([10], [(1, True), (1, True), (9, False)], None, 12, id="sidecars add to the app containers"),
        pytest.param([1], [(2, False)], 3, 5, id="overhead is added last"),
    ],
)
def test_pod_requests(app: list[int], init: list[tuple[int, bool]], overhead: int | None, want: int) -> None:
    assert requests(app, init, overhead) == want


def test_each_container_is_read_once_and_init_containers_by_their_reader() -> None:
    seen: list[str] = []
    total = pod_amounts(
        [{"name": "a"}, {"name": "b"}],
        [{"name": "i", "restartPolicy": "Always"}],
        lambda c: seen.append("app " + c.get("name", "")) or 1,
        lambda a, b: a + b,
        max,
        0,
        read_init=lambda c: seen.append("init " + c.get("name", "")) or 10,
    )
    assert (total, seen) == (12, ["app a", "app b", "init i"])


def test_a_sidecar_is_an_init_container_that_restarts_always() -> None:
    assert is_sidecar({"restartPolicy": "Always"})
    assert not is_sidecar({"restartPolicy": "OnFailure"})
    assert not is_sidecar({})
