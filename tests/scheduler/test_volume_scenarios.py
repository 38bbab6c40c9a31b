"""Scheduler scenarios with volumes, run through the real framework (actions, gang, predicates with
its volume filters, nodeorder, gpushare) on a StaticCache whose PreBind binds through a fake
cluster that binds at once (its PV controller and provisioner answer every write immediately)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from runtimekit.kube.objects import PersistentVolume, PersistentVolumeClaim
from runtimekit.model import NodeCapacity, NodeInventory, NodeName, PodKey
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.cache.objects import task_from_pod
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import JobInfo, JobKey, NodeMeta
from runtimekit.scheduler.kubesem import volumebinding as vb
from runtimekit.scheduler.kubesem.volumes import VolumeCatalog, resource_version
from runtimekit.scheduler.plugins.predicates import VolumePredicates
from scheduler.kubesem.volume_builders import NODE_KEY, catalog_of, pv, pvc, sc, volume_pod

P = KitProtocol.default()
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: gpushare
"""
CLASSES = [sc("local"), sc("standard", provisioner="rancher.io/local-path"), sc("fast", "Immediate")]


class InstantCluster:
    """A `VolumeAccess` whose PV controller binds a volume's claim as soon as the volume is written,
    and whose provisioner makes a volume on the selected node as soon as a claim is given one."""

    def __init__(
        self, claims: Sequence[PersistentVolumeClaim], volumes: Sequence[PersistentVolume], nodes: Sequence[str]
    ) -> None:
        self.claims = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": copy.deepcopy(c) for c in claims}
        self.volumes = {v["metadata"]["name"]: copy.deepcopy(v) for v in volumes}
        self.nodes = {n: {NODE_KEY: n} for n in nodes}
        self.version = 1

    def _bump(self, obj: Any) -> Any:
        out = copy.deepcopy(obj)
        out["metadata"]["resourceVersion"] = str(resource_version(obj) + 1)
        self.version += 1
        return out

    def _bind(self, key: str, volume: str) -> None:
        claim = self._bump(self.claims[key])
        claim["spec"]["volumeName"] = volume
        claim["metadata"].setdefault("annotations", {})["pv.kubernetes.io/bind-completed"] = "yes"
        claim["status"] = {"phase": "Bound"}
        self.claims[key] = claim

    def update_volume(self, volume: PersistentVolume) -> PersistentVolume:
        stored = self.volumes[volume["metadata"]["name"]] = self._bump(volume)
        ref = volume["spec"]["claimRef"]
        self._bind(f"{ref['namespace']}/{ref['name']}", volume["metadata"]["name"])
        return stored

    def update_claim(self, claim: PersistentVolumeClaim) -> PersistentVolumeClaim:
        key = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
        self.claims[key] = self._bump(claim)
        node = claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"]
        name = f"pvc-{claim['metadata']['name']}"
        self.volumes[name] = pv(
            name, node, "1Gi", claim["spec"].get("storageClassName") or "", claim=claim, phase="Bound"
        )
        self._bind(key, name)
        return self.claims[key]

    def catalog(self) -> VolumeCatalog:
        return catalog_of(self.claims.values(), self.volumes.values(), CLASSES, version=self.version)

    def node_labels(self, node: str) -> Mapping[str, str] | None:
        return self.nodes.get(node)

    def pod_exists(self, key: PodKey) -> bool:
        return True

    def wait(self, version: int, timeout: float) -> bool:
        return True


def run(
    nodes: Sequence[str],
    jobs: Sequence[tuple[str, int, Sequence[dict[str, Any]]]],
    claims: Sequence[PersistentVolumeClaim],
    volumes: Sequence[PersistentVolume] = (),
) -> tuple[StaticCache, InstantCluster, Framework]:
    """Nodes (one T4 each, labelled `nodeKey=<name>`), jobs (name, minMember, pod manifests): one session."""
    entries = [
        (
            NodeInventory.simulated(n, "T4", 1, 16384),
            NodeCapacity(64000, 256 << 30, 110),
            NodeMeta(NodeName(n), {NODE_KEY: n}, (), False, "T4"),
        )
        for n in nodes
    ]
    cache = StaticCache(entries)
    cluster = InstantCluster(claims, volumes, nodes)
    cache.volumes = cluster.catalog()
    cache.volume_access = cluster
    for i, (name, min_member, pods) in enumerate(jobs):
        job = JobInfo(JobKey(name), "testns", name, min_member=min_member, created=float(i))
        for manifest in pods:
            manifest["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}  # allocate's, not backfill's
            task = task_from_pod(manifest, P)
            task.job, task.created = job.key, float(i)
            job.add(task)
        cache.add_job(job)
    framework = Framework(parse_conf(CONF), builtin_registry(), BuildContext())
    framework.run_once(cache)
    return cache, cluster, framework


def placed(cache: StaticCache) -> dict[str, str]:
    return {t.name: str(t.node) for t in cache.bound.values()}


def claim_of(cluster: InstantCluster, name: str) -> PersistentVolumeClaim:
    return cluster.claims[f"testns/{name}"]


def test_two_pods_wanting_one_volume_get_it_once() -> None:
    """The second pod's filter sees the volume the first one's Reserve assumed, in the same session."""
    claims = [pvc("a", "1Gi", "local"), pvc("b", "1Gi", "local", uid="uid-b")]
    jobs = [("pa", 1, [volume_pod("pa", ["a"])]), ("pb", 1, [volume_pod("pb", ["b"])])]
    cache, cluster, _ = run(["node1", "node2"], jobs, claims, [pv("only", "node2", "1Gi", "local")])
    assert placed(cache) == {"pa": "node2"}
    assert claim_of(cluster, "a")["spec"]["volumeName"] == "only"
    (errors,) = [e for k, e in cache.unschedulable.items() if k == PodKey("uid-testns-pb")]
    assert errors.reasons == {vb.BIND_CONFLICT: 2}


def test_a_pod_goes_where_its_bound_volume_is() -> None:
    claims = [pvc("data", "1Gi", "local", volume="pinned", bound=True)]
    volumes = [pv("pinned", "node3", "1Gi", "local", claim=claims[0], phase="Bound")]
    cache, _, _ = run(["node1", "node2", "node3"], [("p", 1, [volume_pod("p", ["data"])])], claims, volumes)
    assert placed(cache) == {"p": "node3"}


def test_a_claim_of_a_provisioning_class_is_given_the_pods_node() -> None:
    claims = [pvc("data", "1Gi", "standard")]
    cache, cluster, _ = run(["node1"], [("p", 1, [volume_pod("p", ["data"])])], claims)
    assert placed(cache) == {"p": "node1"}
    claim = claim_of(cluster, "data")
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "node1"
    assert claim["spec"]["volumeName"] == "pvc-data"


def test_an_immediate_claim_not_bound_yet_keeps_the_pod_waiting() -> None:
    cache, _, _ = run(["node1"], [("p", 1, [volume_pod("p", ["data"])])], [pvc("data", "1Gi", "fast")])
    assert placed(cache) == {}
    (errors,) = cache.unschedulable.values()
    assert errors.reasons == {vb.UNBOUND_IMMEDIATE: 1}


def test_a_gang_with_one_unbindable_volume_is_not_placed_at_all() -> None:
    """Member a's claim finds a volume, member b's finds none (and its class provisions nothing): the
    gang's statement is discarded, so a does not bind either and its assumed volume is given back."""
    claims = [pvc("a", "1Gi", "local"), pvc("b", "1Gi", "local", uid="uid-b")]
    jobs = [("gang", 2, [volume_pod("ga", ["a"]), volume_pod("gb", ["b"])])]
    cache, cluster, framework = run(["node1", "node2"], jobs, claims, [pv("one", "node1", "1Gi", "local")])
    assert placed(cache) == {}
    assert "volumeName" not in claim_of(cluster, "a")["spec"]
    predicates = next(p for p in framework.plugins.every.flat if isinstance(p, VolumePredicates))
    assert predicates.filters.assumed.empty
    assert predicates.binder is not None
    assert predicates.binder.plans == {}


def test_a_gang_whose_volumes_all_fit_binds_whole() -> None:
    claims = [pvc("a", "1Gi", "local"), pvc("b", "1Gi", "standard", uid="uid-b")]
    jobs = [("gang", 2, [volume_pod("ga", ["a"]), volume_pod("gb", ["b"])])]
    cache, cluster, _ = run(["node1", "node2"], jobs, claims, [pv("one", "node1", "1Gi", "local")])
    assert placed(cache)["ga"] == "node1"
    assert set(placed(cache)) == {"ga", "gb"}
    assert claim_of(cluster, "a")["spec"]["volumeName"] == "one"
    assert claim_of(cluster, "b")["spec"]["volumeName"] == "pvc-b"
