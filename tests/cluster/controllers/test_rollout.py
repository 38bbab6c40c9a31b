"""The Deployment rollout arithmetic, with the cases of kube's deployment controller tests
(pkg/controller/deployment: rolling_test.go, sync_test.go, util/deployment_util_test.go) as data."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.cluster.controllers import rollout

T_OLDER, T_OLD, T_NEW = "2016-05-20T00:00:00Z", "2016-05-20T01:00:00Z", "2016-05-20T02:00:00Z"


def deployment(replicas: int, surge: object = 0, unavailable: object = 0, **spec: Any) -> dict[str, Any]:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}
    return {"metadata": {"name": "foo"}, "spec": {"replicas": replicas, "strategy": strategy, **spec}}


def rs(name: str, replicas: int, created: str = T_NEW, available: int = 0, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "creationTimestamp": created, "annotations": dict(annotations)},
        "spec": {"replicas": replicas},
        "status": {"availableReplicas": available},
    }


@pytest.mark.parametrize(
    ("surge", "unavailable", "desired", "expected"),
    [
        ("0%", "0%", 0, (0, 1)),
        ("39%", "39%", 10, (4, 3)),
        (None, "39%", 10, (0, 3)),
        ("39%", None, 10, (4, 0)),
        (None, None, 10, (0, 1)),
        (1, 1, 2, (1, 1)),
        ("25%", "25%", 8, (2, 2)),
    ],
    ids=["both zero", "percent rounding", "no surge", "no unavailable", "neither", "ints", "defaults of 8"],
)
def test_fenceposts(surge: object, unavailable: object, desired: int, expected: tuple[int, int]) -> None:
    assert rollout.fenceposts(surge, unavailable, desired) == expected


@pytest.mark.parametrize(
    ("surge", "unavailable"), [("oops", "39%"), ("55%", "urg"), ("5", "1")], ids=["word", "word", "no percent sign"]
)
def test_fenceposts_refuse_what_is_not_a_count_or_percentage(surge: object, unavailable: object) -> None:
    with pytest.raises(ValueError, match="invalid value for IntOrString"):
        rollout.fenceposts(surge, unavailable, 10)


@pytest.mark.parametrize(
    ("replicas", "surge", "old", "new", "expected"),
    [(10, 0, 10, 0, 0), (10, 2, 10, 0, 2), (10, 2, 5, 0, 7), (10, 2, 10, 2, 2)],
    ids=["no surge: wait", "surge of 2", "old half gone", "at the ceiling"],
)
def test_new_replica_set_grows_within_max_surge(replicas: int, surge: int, old: int, new: int, expected: int) -> None:
    d = deployment(replicas, surge=surge, unavailable=0)
    new_set, old_set = rs("foo-v2", new), rs("foo-v1", old, T_OLD)
    assert rollout.new_replicas(d, [new_set, old_set], new_set) == expected


@pytest.mark.parametrize(
    ("unavailable", "old", "new", "old_ready", "new_ready", "expected"),
    [
        (0, 10, 0, 10, 0, 9),
        (2, 10, 0, 10, 0, 8),
        (2, 10, 0, 8, 0, 8),
        (2, 10, 0, 9, 0, 8),
        (2, 8, 2, 8, 0, None),
    ],
    ids=["one at a time", "two unavailable", "unhealthy first", "unhealthy then one ready", "new ones not ready"],
)
def test_old_replica_sets_shrink_within_max_unavailable(
    unavailable: int, old: int, new: int, old_ready: int, new_ready: int, expected: int | None
) -> None:
    d = deployment(10, surge=0, unavailable=unavailable)
    new_set = rs("foo-new", new, available=new_ready)
    old_set = rs("foo-old", old, T_OLD, available=old_ready)
    sizes = rollout.old_scale_down(d, [old_set, new_set], [old_set], new_set)
    assert sizes.get("foo-old") == expected


SCALE_CASES = [
    ("normal scaling event: 10 -> 12", 12, 10, 0, ("foo-v1", 10), [], 12, []),
    ("normal scaling event: 10 -> 5", 5, 10, 0, ("foo-v1", 10), [], 5, []),
    ("proportional scaling: 5 -> 10", 10, 5, 0, ("foo-v2", 2), [("foo-v1", 3)], 4, [6]),
    ("proportional scaling: 5 -> 3", 3, 5, 0, ("foo-v2", 2), [("foo-v1", 3)], 1, [2]),
    ("proportional scaling: 9 -> 4", 4, 9, 0, ("foo-v2", 8), [("foo-v1", 1)], 4, [0]),
    ("proportional scaling: 7 -> 10", 10, 7, 0, ("foo-v3", 2), [("foo-v2", 3), ("foo-v1", 2)], 3, [4, 3]),
    ("proportional scaling: 13 -> 8", 8, 13, 0, ("foo-v3", 2), [("foo-v2", 8), ("foo-v1", 3)], 1, [5, 2]),
    ("leftover distribution: 3 -> 4", 4, 3, 0, ("foo-v3", 1), [("foo-v2", 1), ("foo-v1", 1)], 2, [1, 1]),
    ("leftover distribution: 3 -> 2", 2, 3, 0, ("foo-v3", 1), [("foo-v2", 1), ("foo-v1", 1)], 1, [1, 0]),
    ("no new rs: 4 -> 5", 5, 4, 0, None, [("foo-v2", 2), ("foo-v1", 2)], None, [3, 2]),
    ("scale down to zero", 0, 6, 0, ("foo-v3", 3), [("foo-v2", 2), ("foo-v1", 1)], 0, [0, 0]),
    ("scale up from zero", 6, 6, 0, ("foo-v3", 0), [("foo-v2", 0), ("foo-v1", 0)], 6, [0, 0]),
    ("surge pods: 10 -> 20", 20, 10, 2, ("foo-v2", 6), [("foo-v1", 6)], 11, [11]),
]


@pytest.mark.parametrize(
    ("name", "replicas", "before", "surge", "new", "olds", "expected_new", "expected_old"),
    SCALE_CASES,
    ids=[case[0] for case in SCALE_CASES],
)
def test_proportional_scaling(
    name: str,
    replicas: int,
    before: int,
    surge: int,
    new: tuple[str, int] | None,
    olds: list[tuple[str, int]],
    expected_new: int | None,
    expected_old: list[int],
) -> None:
    """Each set carries the replica annotations of the Deployment before it was scaled."""
    marks = {rollout.DESIRED: str(before), rollout.MAX_REPLICAS: str(before + surge)}
    new_set = rs(new[0], new[1], T_NEW, **marks) if new else None
    created = [T_OLD, T_OLDER]
    old_sets = [rs(n, size, created[i], **marks) for i, (n, size) in enumerate(olds)]
    sizes = rollout.proportional_sizes(deployment(replicas, surge=surge), new_set, old_sets)

    def size(obj: dict[str, Any]) -> int:
        return sizes.get(obj["metadata"]["name"], obj["spec"]["replicas"])

    if new_set is not None:
        assert size(new_set) == expected_new
    assert [size(o) for o in old_sets] == expected_old


def test_both_surge_and_size_change_scale_in_proportion() -> None:
    marks = {rollout.DESIRED: "10", rollout.MAX_REPLICAS: "13"}
    new_set, old_set = rs("foo-v2", 5, T_NEW, **marks), rs("foo-v1", 8, T_OLD, **marks)
    sizes = rollout.proportional_sizes(deployment(50, surge=6), new_set, [old_set])
    assert sizes == {"foo-v2": 22, "foo-v1": 34}


def test_a_saturated_new_set_empties_the_old_ones() -> None:
    new_set = rs("foo-v2", 2, T_NEW, available=2, **{rollout.DESIRED: "2"})
    new_set["status"]["availableReplicas"] = 2
    sizes = rollout.proportional_sizes(deployment(2, surge=1, unavailable=1), new_set, [rs("foo-v1", 1, T_OLD)])
    assert sizes == {"foo-v1": 0}


def test_a_saturated_but_broken_new_set_leaves_the_old_pods() -> None:
    new_set = rs("foo-v2", 2, T_NEW, available=0, **{rollout.DESIRED: "2", rollout.MAX_REPLICAS: "3"})
    old_set = rs("foo-v1", 1, T_OLD, **{rollout.DESIRED: "2", rollout.MAX_REPLICAS: "3"})
    sizes = rollout.proportional_sizes(deployment(2, surge=1, unavailable=1), new_set, [old_set])
    assert sizes.get("foo-v2", 2) == 2
    assert sizes.get("foo-v1", 1) == 1


def _history(replicas: list[int], statuses: list[int], revisions: list[str] | None = None) -> list[dict[str, Any]]:
    times = ["2016-05-20T00:00:00Z", "2016-05-20T00:01:00Z", "2016-05-20T00:02:00Z", "2016-05-20T00:03:00Z"]
    sets = []
    for i, (spec, status) in enumerate(zip(replicas, statuses, strict=True)):
        annotations = {rollout.REVISION: revisions[i]} if revisions and revisions[i] else {}
        sets.append(
            {
                "metadata": {"name": f"foo-{i + 1}", "creationTimestamp": times[i], "annotations": annotations},
                "spec": {"replicas": spec},
                "status": {"replicas": status},
            }
        )
    return sets


@pytest.mark.parametrize(
    ("replicas", "statuses", "limit", "deleted"),
    [
        ([0, 0, 0], [0, 0, 0], 1, 2),
        ([0, 0, 1, 1], [0, 1, 0, 1], 0, 1),
        ([0, 0], [0, 0], 0, 2),
        ([1, 1], [1, 1], 0, 0),
        ([0, 0, 0], [0, 0, 0], rollout.UNLIMITED, 0),
    ],
    ids=["beyond the limit", "only empty ones", "limit zero", "none empty", "unlimited"],
)
def test_history_limit_deletes_empty_old_sets(
    replicas: list[int], statuses: list[int], limit: int, deleted: int
) -> None:
    d = deployment(1, revisionHistoryLimit=limit)
    assert len(rollout.history_victims(d, _history(replicas, statuses))) == deleted


@pytest.mark.parametrize(
    ("replicas", "revisions", "limit", "deleted"),
    [
        ([0, 0], ["1", "2"], 1, {"foo-1"}),
        ([0, 0], ["2", "1"], 1, {"foo-2"}),
        ([0, 0], ["1", ""], 1, {"foo-2"}),
        ([0, 0], ["", "2"], 1, {"foo-1"}),
        ([1, 0, 0], ["1", "2", "3"], 1, {"foo-2"}),
        ([1, 1, 0], ["1", "2", "3"], 1, set()),
        ([0, 0, 0, 0], ["3", "1", "4", "2"], 2, {"foo-2", "foo-4"}),
    ],
    ids=[
        "lowest revision",
        "revision not age",
        "no revision first",
        "no revision first too",
        "busy kept",
        "all busy",
        "two",
    ],
)
def test_history_limit_goes_by_revision(
    replicas: list[int], revisions: list[str], limit: int, deleted: set[str]
) -> None:
    d = deployment(1, revisionHistoryLimit=limit)
    victims = rollout.history_victims(d, _history(replicas, replicas, revisions))
    assert {v["metadata"]["name"] for v in victims} == deleted


def test_new_set_annotations_carry_the_revision_and_the_replica_counts() -> None:
    d = deployment(4, surge="25%", unavailable="25%")
    d["metadata"]["annotations"] = {"team": "ml", "kubectl.kubernetes.io/last-applied-configuration": "{}"}
    created = rollout.new_set_annotations(d, {}, 3, exists=False)
    assert created == {"team": "ml", rollout.REVISION: "3", rollout.DESIRED: "4", rollout.MAX_REPLICAS: "5"}
    rolled_back = rollout.new_set_annotations(d, {rollout.REVISION: "1", rollout.REVISION_HISTORY: "0"}, 3, exists=True)
    assert rolled_back[rollout.REVISION] == "3"
    assert rolled_back[rollout.REVISION_HISTORY] == "0,1"


def test_status_counts_come_from_the_replica_sets() -> None:
    d = deployment(3)
    d["metadata"]["generation"] = 4
    new_set = {
        "metadata": {"name": "n"},
        "spec": {"replicas": 2},
        "status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 1},
    }
    old_set = {
        "metadata": {"name": "o"},
        "spec": {"replicas": 2},
        "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2},
    }
    status = rollout.calculate_status(d, [old_set, new_set], new_set)
    assert status == {
        "observedGeneration": 4,
        "replicas": 4,
        "updatedReplicas": 2,
        "readyReplicas": 3,
        "availableReplicas": 3,
        "unavailableReplicas": 1,
    }
    assert not rollout.is_complete(d, status)
    assert rollout.is_complete(d, {**status, "replicas": 3, "updatedReplicas": 3})


def test_a_stale_status_does_not_scale_an_old_set_down_twice() -> None:
    # 4 replicas, maxUnavailable 1, maxSurge 1: the old set was just cut from 4 to 3, but its status
    # still counts the 4 pods it had (its controller has not seen the fourth go); the new set's one
    # pod is available. Available are 3 + 1, so one more old pod may go, not two.
    d = deployment(4, surge=1, unavailable=1)
    new_set = rs("foo-new", 1, available=1)
    old_set = rs("foo-old", 3, T_OLD, available=4)
    assert rollout.old_scale_down(d, [old_set, new_set], [old_set], new_set) == {"foo-old": 2}
