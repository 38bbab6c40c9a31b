"""A Deployment's rollout arithmetic, as kube's deployment controller (and its util package) does it.

Pure functions on the JSON objects: fenceposts (`maxSurge` rounds up, `maxUnavailable` down, both
zero means one unavailable), how far the new ReplicaSet may grow (`new_replicas`), how far old
ones may shrink without going under `replicas - maxUnavailable` (`old_scale_down`, unhealthy
replicas first), proportional scaling of every active ReplicaSet when `replicas` changes in the
middle of a rollout (`proportional_sizes`), which old ReplicaSets the revision history limit lets
go (`history_victims`), the revision and replica annotations, and the status with its `Available`
condition (`calculate_status`). The controller (`deployments.py`) does the I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from runtimekit.base.timestamps import parse_rfc3339
from runtimekit.cluster.controllers.pods import semantic, template_hash
from runtimekit.kube.objects import (
    Deployment,
    DeploymentStatus,
    PodTemplateSpec,
    ReplicaSet,
    RollingUpdateDeployment,
    meta,
)
from runtimekit.kube.semantics import intstr

REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
HASH_LABEL = "pod-template-hash"
NOT_COPIED = frozenset(
    {"kubectl.kubernetes.io/last-applied-configuration", REVISION, REVISION_HISTORY, DESIRED, MAX_REPLICAS}
)
UNLIMITED = 2**31 - 1  # math.MaxInt32: no progress deadline, no history limit
REVISION_HISTORY_CHARS = 2000
Count = Literal["replicas", "readyReplicas", "availableReplicas", "observedGeneration"]
"""The status counts a Deployment and a ReplicaSet both have."""
Progress = Literal["replicas", "updatedReplicas", "readyReplicas", "availableReplicas"]


def replicas(obj: Deployment | ReplicaSet) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


def status_count(obj: Deployment | ReplicaSet, field: Count) -> int:
    return int((obj.get("status") or {}).get(field) or 0)


def same_template(a: PodTemplateSpec, b: PodTemplateSpec) -> bool:
    """Whether two pod templates are equal ignoring `pod-template-hash` (kube's EqualIgnoreHash)."""

    def stripped(template: PodTemplateSpec) -> Any:
        clean = semantic(template)
        (clean.get("metadata") or {}).get("labels", {}).pop(HASH_LABEL, None)
        return semantic(clean)

    return bool(stripped(a) == stripped(b))


def has_deadline(deployment: Deployment) -> bool:
    deadline = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    return deadline is not None and int(deadline) != UNLIMITED


def template_digest(template: PodTemplateSpec, collisions: int) -> str:
    """The `pod-template-hash` of a Deployment's template."""
    return template_hash(template, collisions)


def is_rolling(deployment: Deployment) -> bool:
    strategy = (deployment.get("spec") or {}).get("strategy") or {}
    return str(strategy.get("type", "RollingUpdate")) == "RollingUpdate"


def fenceposts(max_surge: object, max_unavailable: object, desired: int) -> tuple[int, int]:
    """(surge, unavailable) for `desired` replicas (kube's ResolveFenceposts); ValueError for bad values."""
    surge = intstr.scaled_value(0 if max_surge is None else max_surge, desired, round_up=True)
    unavailable = intstr.scaled_value(0 if max_unavailable is None else max_unavailable, desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # a rounded-down percentage must not stall the rollout
    return surge, unavailable


def _rolling(deployment: Deployment) -> RollingUpdateDeployment:
    return ((deployment.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}


def max_surge(deployment: Deployment) -> int:
    if not is_rolling(deployment):
        return 0
    rolling = _rolling(deployment)
    return fenceposts(rolling.get("maxSurge"), rolling.get("maxUnavailable"), replicas(deployment))[0]


def max_unavailable(deployment: Deployment) -> int:
    if not is_rolling(deployment) or replicas(deployment) == 0:
        return 0
    rolling = _rolling(deployment)
    unavailable = fenceposts(rolling.get("maxSurge"), rolling.get("maxUnavailable"), replicas(deployment))[1]
    return min(unavailable, replicas(deployment))


def created_order(sets: Sequence[ReplicaSet]) -> list[ReplicaSet]:
    """Oldest first (creation time, then name)."""
    return sorted(
        sets, key=lambda rs: (parse_rfc3339(meta(rs).get("creationTimestamp")) or 0.0, str(meta(rs).get("name")))
    )


def active(sets: Sequence[ReplicaSet | None]) -> list[ReplicaSet]:
    return [rs for rs in sets if rs is not None and replicas(rs) > 0]


def new_replicas(deployment: Deployment, all_sets: Sequence[ReplicaSet], new_set: ReplicaSet) -> int:
    """What the new ReplicaSet may grow to now (kube's NewRSNewReplicas)."""
    if not is_rolling(deployment):
        return replicas(deployment)
    total = sum(replicas(rs) for rs in all_sets)
    ceiling = replicas(deployment) + max_surge(deployment)
    if total >= ceiling:
        return replicas(new_set)
    grow = min(ceiling - total, replicas(deployment) - replicas(new_set))
    return replicas(new_set) + grow


def old_scale_down(
    deployment: Deployment, all_sets: Sequence[ReplicaSet], old_sets: Sequence[ReplicaSet], new_set: ReplicaSet
) -> dict[str, int]:
    """New sizes of old ReplicaSets (by name) for one rolling-update step: unhealthy replicas go
    first, then available ones while availability stays at `replicas - maxUnavailable`."""
    sizes = {str(meta(rs).get("name")): replicas(rs) for rs in old_sets}
    if sum(sizes.values()) == 0:
        return {}
    minimum = replicas(deployment) - max_unavailable(deployment)
    new_unavailable = replicas(new_set) - status_count(new_set, "availableReplicas")
    budget = sum(replicas(rs) for rs in all_sets) - minimum - new_unavailable
    if budget <= 0:
        return {}
    ordered = created_order(old_sets)
    cleaned = 0
    for rs in ordered:  # unhealthy replicas cost no availability
        name = str(meta(rs).get("name"))
        unhealthy = sizes[name] - status_count(rs, "availableReplicas")
        if cleaned >= budget:
            break
        if sizes[name] == 0 or unhealthy <= 0:
            continue
        down = min(budget - cleaned, unhealthy)
        sizes[name] -= down
        cleaned += down
    # a set's status may still count pods it was just told to delete (its controller has not seen
    # them go yet): never more available than it is asked to keep, or a step scales down twice
    available = sum(min(status_count(rs, "availableReplicas"), replicas(rs)) for rs in all_sets)
    if available > minimum:
        allowed, done = available - minimum, 0
        for rs in ordered:
            name = str(meta(rs).get("name"))
            if done >= allowed:
                break
            if sizes[name] == 0:
                continue
            down = min(sizes[name], allowed - done)
            sizes[name] -= down
            done += down
    return {name: size for name, size in sizes.items() if size != replicas(_named(old_sets, name))}


def _named(sets: Sequence[ReplicaSet], name: str) -> ReplicaSet:
    return next(rs for rs in sets if meta(rs).get("name") == name)


def _annotation_int(rs: ReplicaSet, key: str) -> int | None:
    try:
        return int(str((meta(rs).get("annotations") or {})[key]))
    except (KeyError, ValueError):
        return None


def is_saturated(deployment: Deployment, rs: ReplicaSet | None) -> bool:
    """The new ReplicaSet holds every replica, believes so, and all of them are available."""
    if rs is None:
        return False
    wanted = replicas(deployment)
    desired = _annotation_int(rs, DESIRED)
    return replicas(rs) == wanted and desired == wanted and status_count(rs, "availableReplicas") == wanted


def active_or_latest(new_set: ReplicaSet | None, old_sets: Sequence[ReplicaSet]) -> ReplicaSet | None:
    """The only active ReplicaSet, or the newest when none is active; None when several are."""
    if new_set is None and not old_sets:
        return None
    newest_first = list(reversed(created_order(old_sets)))
    live = active([*newest_first, new_set])
    if not live:
        return new_set if new_set is not None else newest_first[0]
    return live[0] if len(live) == 1 else None


def _round(value: float) -> int:
    return math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5)


def _fraction(rs: ReplicaSet, deployment: Deployment) -> int:
    if replicas(deployment) == 0:
        return -replicas(rs)
    target = replicas(deployment) + max_surge(deployment)
    annotated = _annotation_int(rs, MAX_REPLICAS)
    if annotated is None:
        annotated = status_count(deployment, "replicas")
    return _round(replicas(rs) * target / annotated) - replicas(rs)


def _proportion(rs: ReplicaSet, deployment: Deployment, to_add: int, added: int) -> int:
    if replicas(rs) == 0 or to_add in (0, added):
        return 0
    fraction, allowed = _fraction(rs, deployment), to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def proportional_sizes(
    deployment: Deployment, new_set: ReplicaSet | None, old_sets: Sequence[ReplicaSet]
) -> dict[str, int]:
    """New sizes (by name) when `replicas` changed (kube's `scale`): one active set takes all, a
    saturated new set empties the old ones, else every active set grows or shrinks in proportion."""
    single = active_or_latest(new_set, old_sets)
    if single is not None:
        return {str(meta(single).get("name")): replicas(deployment)}
    if is_saturated(deployment, new_set):
        return {str(meta(rs).get("name")): 0 for rs in active(old_sets)}
    if not is_rolling(deployment):
        return {}
    sets = active([*old_sets, new_set])
    allowed = replicas(deployment) + max_surge(deployment) if replicas(deployment) > 0 else 0
    to_add = allowed - sum(replicas(rs) for rs in sets)

    if to_add:  # larger first; among equals the newer grows first and the older shrinks first
        ordered = created_order(sets)
        sets = sorted(ordered[::-1] if to_add > 0 else ordered, key=lambda rs: -replicas(rs))
    sizes: dict[str, int] = {}
    added = 0
    for rs in sets:
        proportion = _proportion(rs, deployment, to_add, added) if to_add else 0
        sizes[str(meta(rs).get("name"))] = replicas(rs) + proportion
        added += proportion
    if sets and to_add:
        first = str(meta(sets[0]).get("name"))
        sizes[first] = max(0, sizes[first] + to_add - added)
    return sizes


def revision(rs: ReplicaSet) -> int:
    return _annotation_int(rs, REVISION) or 0


def history_victims(deployment: Deployment, old_sets: Sequence[ReplicaSet]) -> list[ReplicaSet]:
    """Old, empty ReplicaSets beyond `revisionHistoryLimit`, lowest revision first."""
    limit = int((deployment.get("spec") or {}).get("revisionHistoryLimit", 10))
    if limit == UNLIMITED:
        return []
    alive = [rs for rs in old_sets if not meta(rs).get("deletionTimestamp")]
    surplus = len(alive) - limit
    if surplus <= 0:
        return []
    by_revision = sorted(created_order(alive), key=revision)
    return [
        rs
        for rs in by_revision[:surplus]
        if status_count(rs, "replicas") == 0
        and replicas(rs) == 0
        and int(meta(rs).get("generation") or 0) <= status_count(rs, "observedGeneration")
    ]


def new_set_annotations(
    deployment: Deployment, current: Mapping[str, str], new_revision: int, exists: bool
) -> dict[str, str]:
    """The annotations the new ReplicaSet should carry (kube's SetNewReplicaSetAnnotations)."""
    result = dict(current)
    for key, value in ((meta(deployment).get("annotations")) or {}).items():
        if key not in NOT_COPIED:
            result[key] = value
    old = current.get(REVISION, "")
    old_revision = int(old) if old.isdigit() else 0
    if old_revision < new_revision:
        result[REVISION] = str(new_revision)
        if old:  # rolling back to this set: remember the revisions it served
            history = [r for r in current.get(REVISION_HISTORY, "").split(",") if r] + [old]
            while len(",".join(history)) > REVISION_HISTORY_CHARS and history:
                history.pop(0)
            result[REVISION_HISTORY] = ",".join(history)
    if not exists:
        result.update(replica_annotations(deployment))
    return result


def replica_annotations(deployment: Deployment) -> dict[str, str]:
    wanted = replicas(deployment)
    return {DESIRED: str(wanted), MAX_REPLICAS: str(wanted + max_surge(deployment))}


def calculate_status(
    deployment: Deployment, all_sets: Sequence[ReplicaSet], new_set: ReplicaSet | None
) -> DeploymentStatus:
    """Counts from the ReplicaSets; conditions are left to the caller (kube's calculateStatus)."""
    available = sum(status_count(rs, "availableReplicas") for rs in all_sets)
    total = sum(replicas(rs) for rs in all_sets)
    status: DeploymentStatus = {
        "observedGeneration": int(meta(deployment).get("generation") or 0),
        "replicas": sum(status_count(rs, "replicas") for rs in all_sets),
        "updatedReplicas": status_count(new_set, "replicas") if new_set is not None else 0,
        "readyReplicas": sum(status_count(rs, "readyReplicas") for rs in all_sets),
        "availableReplicas": available,
        "unavailableReplicas": max(0, total - available),
    }
    collisions = (deployment.get("status") or {}).get("collisionCount")
    if collisions is not None:
        status["collisionCount"] = collisions
    return status


def is_complete(deployment: Deployment, status: DeploymentStatus) -> bool:
    """Every replica updated and available, no old ones left, the latest spec observed."""
    wanted = replicas(deployment)
    return (
        int(status.get("updatedReplicas") or 0) == wanted
        and int(status.get("replicas") or 0) == wanted
        and int(status.get("availableReplicas") or 0) == wanted
        and int(status.get("observedGeneration") or 0) >= int(meta(deployment).get("generation") or 0)
    )


def is_progressing(deployment: Deployment, status: DeploymentStatus) -> bool:
    """More replicas updated, ready or available than last time, or fewer old ones."""
    old = deployment.get("status") or {}

    def value(source: DeploymentStatus, field: Progress) -> int:
        return int(source.get(field) or 0)

    old_old = value(old, "replicas") - value(old, "updatedReplicas")
    new_old = value(status, "replicas") - value(status, "updatedReplicas")
    return (
        value(status, "updatedReplicas") > value(old, "updatedReplicas")
        or new_old < old_old
        or value(status, "readyReplicas") > value(old, "readyReplicas")
        or value(status, "availableReplicas") > value(old, "availableReplicas")
    )
