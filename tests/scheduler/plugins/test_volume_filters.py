"""The volume filters of the `predicates` plugin against kube-scheduler's own tables
(`tests/scheduler/kubesem/volume_cases.py`), each run through a real session with only its filter
on, as upstream tests one plugin at a time; then the filters together, as the default conf has them.

Translated (upstream case -> here): volume_binding_test.go TestVolumeBinding 15/15 (filter outcomes;
the score columns need the StorageCapacityScoring gate), binder_test.go TestFindPodVolumes without
and with provisioning 30/30 (the "no CSIDriver" variant; CSIStorageCapacity is not modelled),
volume_zone_test.go 24/24, csi_test.go TestCSILimits 31/33 (the two VolumeAttachment cases
left out), volume_restrictions_test.go 22/22.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

from runtimekit.kube.objects import PersistentVolume, PersistentVolumeClaim
from runtimekit.scheduler.framework.info import TaskStatus
from runtimekit.scheduler.kubesem import volumebinding as vb
from runtimekit.scheduler.plugins.predicates import REASONS, VolumePredicates
from scheduler.kubesem import volume_cases as cases
from scheduler.kubesem.builders import Node, labelled
from scheduler.kubesem.volume_builders import NODE_KEY, catalog_of, sc, volume_pod
from scheduler.plugins.kube_harness import cache_of, plugin, reasons, session_of, task_of

Json = dict[str, Any]
SWITCHES = ("VolumeRestrictionsEnable", "NodeVolumeLimitsEnable", "VolumeBindingEnable", "VolumeZoneEnable")


def only(switch: str) -> dict[str, Any]:
    """Predicates arguments with one volume filter on."""
    return {f"predicate.{s}": s == switch for s in SWITCHES}


def run(
    nodes: Sequence[Node],
    manifest: Json,
    claims: Sequence[PersistentVolumeClaim] = (),
    volumes: Sequence[PersistentVolume] = (),
    classes: Sequence[Any] = (),
    csinodes: Sequence[Any] = (),
    placed: Sequence[Json] = (),
    switch: str | None = None,
) -> dict[str, str]:
    cache = cache_of(nodes, placed)
    cache.volumes = catalog_of(claims, volumes, classes, csinodes)
    return reasons(session_of(cache, only(switch) if switch else {}), manifest)


def fails_for_claims(reason: str) -> bool:
    """A reason of the pod's claims (a PreFilter failure upstream), not one of a node."""
    return reason not in REASONS


# -- VolumeBinding -------------------------------------------------------------------------------
@pytest.mark.parametrize(("nodes", "manifest", "claims", "volumes", "expected"), cases.PLUGIN_FILTER)
def test_volume_binding_plugin(
    nodes: list[tuple[str, dict[str, str]]], manifest: Json, claims: list, volumes: list, expected: dict[str, str]
) -> None:
    got = run(
        [labelled(n, labels) for n, labels in nodes],
        manifest,
        claims,
        volumes,
        cases.PLUGIN_CLASSES,
        switch=SWITCHES[2],
    )
    assert got == expected


NODE1 = [labelled("node1", {NODE_KEY: "node1"})]


@pytest.mark.parametrize(
    ("manifest", "claims", "cached", "volumes", "reason", "bindings", "provisions"), cases.FIND_POD_VOLUMES
)
def test_find_pod_volumes(
    manifest: Json | None,
    claims: list[PersistentVolumeClaim],
    cached: list[PersistentVolumeClaim],
    volumes: list[PersistentVolume],
    reason: str,
    bindings: list[tuple[str, str]],
    provisions: list[str],
) -> None:
    """binder_test.go's FindPodVolumes, through the plugin: the reason node1 fails, else what Reserve
    assumes there (the volumes bound to the claims, the claims given node1 to provision)."""
    pod = manifest or volume_pod(claims=[c["metadata"]["name"] for c in claims])
    cache = cache_of(NODE1)
    cache.volumes = catalog_of(cached, volumes, cases.CLASSES)
    ssn = session_of(cache, only(SWITCHES[2]))
    got = reasons(ssn, pod)
    if reason == cases.FAILS:
        assert set(got) == {"node1"}
        assert fails_for_claims(got["node1"]), got
        return
    assert got == ({"node1": reason} if reason else {})
    if reason:
        return
    predicates: VolumePredicates = plugin(ssn, VolumePredicates)
    task = task_of(pod)
    task.node, task.status = cache.node("node1"), TaskStatus.ALLOCATED
    assert predicates.reserve(task, None, ssn).ok  # type: ignore[arg-type]
    reserved = predicates.binder.plans.get(task.key) if predicates.binder else None
    got_bindings = (
        [(b.claim["metadata"]["name"], b.volume["metadata"]["name"]) for b in reserved.bindings] if reserved else []
    )
    assert got_bindings == bindings
    got_provisions = [c["metadata"]["name"] for c in reserved.provisions] if reserved else []
    assert got_provisions == provisions
    for claim in reserved.provisions if reserved else ():
        assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "node1"
    for chosen in reserved.bindings if reserved else ():
        assert chosen.volume["spec"]["claimRef"]["name"] == chosen.claim["metadata"]["name"]


def test_a_volume_assumed_for_one_claim_is_not_found_again_for_another() -> None:
    """binder_test.go's TestFindAssumeVolumes: once a claim's volume is assumed, finding volumes for
    the same claim again (50 times) keeps answering that volume, and another claim of the same size
    no longer gets it."""
    pod = volume_pod(claims=["unbound-pvc"])
    cache = cache_of(NODE1)
    cache.volumes = catalog_of([cases.unbound_pvc], [cases.pv_node2, cases.pv_node1a, cases.pv_node1c], cases.CLASSES)
    ssn = session_of(cache, only(SWITCHES[2]))
    predicates: VolumePredicates = plugin(ssn, VolumePredicates)
    task = task_of(pod)
    task.node = cache.node("node1")
    assert predicates.reserve(task, None, ssn).ok  # type: ignore[arg-type]
    assert predicates.binder is not None
    (chosen,) = predicates.binder.plans[task.key].bindings
    assert chosen.volume["metadata"]["name"] == "pv-node1a"
    view = predicates.filters.view(ssn)
    claims = vb.pod_claims("testns", task_volumes(pod), view)
    assert isinstance(claims, vb.PodClaims)
    for _ in range(50):
        found = vb.find_pod_volumes(claims, "node1", {NODE_KEY: "node1"}, view)
        assert [b.volume["metadata"]["name"] for b in found.plan.bindings] == ["pv-node1a"]


def task_volumes(pod: Json) -> Any:
    from runtimekit.scheduler.kubesem.pods import pod_facts

    return pod_facts(pod).volumes


# -- VolumeZone ----------------------------------------------------------------------------------
ZONE_OBJECTS = {
    "single": (cases.SINGLE_ZONE_PVCS, cases.SINGLE_ZONE_PVS, []),
    "multi": (cases.MULTI_ZONE_PVCS, cases.MULTI_ZONE_PVS, []),
    "binding": (cases.WITH_BINDING_PVCS, cases.SINGLE_ZONE_PVS[:1], cases.WITH_BINDING_CLASSES),
}


@pytest.mark.parametrize(("table", "claim", "labels", "expected"), cases.ZONE)
def test_volume_zone(table: str, claim: str, labels: dict[str, str], expected: str) -> None:
    claims, volumes, classes = ZONE_OBJECTS[table]
    pod = volume_pod("pod_1", [claim] if claim else [], ns="default")
    got = run([labelled("host1", labels)], pod, claims, volumes, classes, switch=SWITCHES[3])
    assert got == ({"host1": expected} if expected else {})


# -- NodeVolumeLimits ------------------------------------------------------------------------------
@pytest.mark.parametrize(("new", "existing", "drivers", "source", "max_vols", "claims", "expected"), cases.CSI_LIMITS)
def test_csi_limits(
    new: Json, existing: list[Json], drivers: list[str], source: str, max_vols: int, claims: list, expected: str
) -> None:
    csi_claims, csi_volumes = cases.csi_objects(drivers)
    placed = [{**p, "spec": {**p["spec"], "nodeName": cases.CSI_NODE}} for p in existing]
    got = run(
        [labelled(cases.CSI_NODE, {})],
        new,
        csi_claims + claims,
        csi_volumes,
        [sc("csi-sc", None, drivers[0])],
        cases.csi_limits_node(source, max_vols, drivers),
        placed,
        SWITCHES[1],
    )
    assert got == ({cases.CSI_NODE: expected} if expected else {})


# -- VolumeRestrictions --------------------------------------------------------------------------
@pytest.mark.parametrize(("new", "existing", "expected"), cases.DISK_CONFLICTS)
def test_disk_conflicts(new: Json, existing: list[Json], expected: str) -> None:
    placed = [{**p, "spec": {**p["spec"], "nodeName": "n1"}} for p in existing]
    got = run([labelled("n1", {})], new, placed=placed, switch=SWITCHES[0])
    assert got == ({"n1": expected} if expected else {})


@pytest.mark.parametrize(("new", "existing", "claims", "expected"), cases.ACCESS_MODES)
def test_read_write_once_pod(new: Json, existing: list[Json], claims: list, expected: str) -> None:
    got = run([labelled("node-1", {})], new, claims, placed=existing, switch=SWITCHES[0])
    assert got == ({"node-1": expected} if expected else {})


def test_read_write_once_pod_is_cluster_wide() -> None:
    """A ReadWriteOncePod claim in use on one node rules every node out, and an eviction may help."""
    nodes = [labelled("node-1", {}), labelled("node-2", {})]
    got = run(nodes, cases.one_conflict, [cases.RWOP_1], placed=[cases.with_one], switch=SWITCHES[0])
    assert got == {"node-1": cases.RWOP, "node-2": cases.RWOP}


# -- together ------------------------------------------------------------------------------------
def test_the_default_conf_runs_every_volume_filter_and_binds() -> None:
    ssn = session_of(cache_of(NODE1))
    predicates = plugin(ssn, VolumePredicates)
    assert predicates.binder is not None
    assert set(predicates.watches) == {"persistentvolumeclaims", "persistentvolumes", "storageclasses", "csinodes"}


def test_with_every_volume_filter_off_the_plugin_is_as_before() -> None:
    from runtimekit.scheduler.plugins.predicates import Predicates

    ssn = session_of(cache_of(NODE1), {f"predicate.{s}": False for s in SWITCHES})
    found = plugin(ssn, Predicates)
    assert type(found) is Predicates
    assert found.volumes is None
    assert not ssn.plugins.reserve.flat
    assert not ssn.plugins.pre_bind.flat
    assert not ssn.plugins.watches.flat


def test_a_pod_without_volumes_never_reaches_the_volume_filters() -> None:
    cache = cache_of(NODE1)
    ssn = session_of(cache)
    predicates: VolumePredicates = plugin(ssn, VolumePredicates)
    calls: list[str] = []
    original = predicates.filters.reasons
    predicates.filters.reasons = lambda *a: calls.append("x") or original(*a)  # type: ignore[method-assign]
    assert reasons(ssn, volume_pod(ns="default")) == {}
    assert calls == []


def test_a_pvc_pinned_volume_sends_the_pod_to_its_node() -> None:
    """A bound claim whose volume is pinned to one node: every other node has a node affinity conflict."""
    nodes = [labelled(n, {NODE_KEY: n}) for n in ("node1", "node2", "node3")]
    got = run(nodes, volume_pod(claims=["bound-pvc"]), [cases.bound_pvc], [cases.pv_bound], cases.CLASSES)
    assert got == {"node2": vb.NODE_CONFLICT, "node3": vb.NODE_CONFLICT}


def test_claims_problems_are_unresolvable_and_conflicts_are_not() -> None:
    from runtimekit.scheduler.framework.status import FitErrors

    cache = cache_of(NODE1, [{**cases.with_one, "spec": {**cases.with_one["spec"], "nodeName": "node1"}}])
    cache.volumes = catalog_of([cases.RWOP_1], [], cases.CLASSES)
    ssn = session_of(cache, only(SWITCHES[0]))
    for pod, unresolvable in ((volume_pod(claims=["missing"], ns="default"), True), (cases.one_conflict, False)):
        errors = FitErrors(nodes=1)
        rows = ssn.predicate(task_of(copy.deepcopy(pod)), ssn.table.active_rows(), errors)
        assert rows.size == 0
        assert bool(errors.unresolvable_rows()) is unresolvable
