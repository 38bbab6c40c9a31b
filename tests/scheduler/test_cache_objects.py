"""Reading API objects into the scheduler's values: a PodGroup's minResources as Volcano's job
controller writes it (its quota usage, with `requests.*`, `limits.*` and `count/*` names)."""

from __future__ import annotations

from runtimekit.scheduler.cache.objects import resources_of
from scheduler.fake_api import P


def test_volcano_quota_names_in_min_resources_are_not_resources() -> None:
    volcano = {
        "count/pods": "2",
        "pods": "2",
        "cpu": "2",
        "requests.cpu": "2",
        "limits.cpu": "2",
        "memory": "4Gi",
        "requests.memory": "4Gi",
        P.resources.core: "100",
        f"requests.{P.resources.core}": "100",
    }
    plain = {"cpu": "2", "memory": "4Gi", P.resources.core: "100"}
    assert resources_of(volcano, P) == resources_of(plain, P)
    assert resources_of(volcano, P) is not None
