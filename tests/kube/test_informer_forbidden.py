"""An informer on a kind the role may not grant (`forbidden_ok`): it counts as synced and empty, so a
scheduler upgraded before its ClusterRole still schedules; any other informer keeps waiting."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.kube.errors import KubeError
from runtimekit.kube.informer import Informer


class Forbidden:
    """The http client of a role without the kind: every list is refused."""

    def __init__(self) -> None:
        self.lists = 0

    def list(self, path: str, params: Any = None) -> Any:
        self.lists += 1
        raise KubeError.of(403, "Forbidden", f"cannot list resource at {path}")


@pytest.mark.parametrize(("forbidden_ok", "synced"), [(True, True), (False, False)])
def test_a_forbidden_kind_is_synced_and_empty_only_when_allowed_to_be(forbidden_ok: bool, synced: bool) -> None:
    seen: list[Any] = []
    http = Forbidden()
    informer = Informer(
        http,  # type: ignore[arg-type]
        "/api/v1/namespaces",
        lambda kind, obj: seen.append(obj),
        name="namespaces",
        forbidden_ok=forbidden_ok,
    ).start()
    try:
        assert informer.synced.wait(30.0 if synced else 0.3) is synced  # set at once, or never
        assert http.lists >= 1
        assert not seen
        assert informer.served is not synced
    finally:
        informer.stop()
