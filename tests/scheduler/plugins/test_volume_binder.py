"""Volume binding after the node is chosen (the `predicates` plugin's Reserve, Unreserve and PreBind)
against the facts of kube-scheduler's `binder_test.go`: TestAssumePodVolumes 7/7,
TestRevertAssumedPodVolumes 1/1, TestBindAPIUpdate 8/11, TestCheckBindings 17/20 and
TestBindPodVolumes 10/11 (the cases upstream writes with nil slices, a Go distinction the kit's
typed plans do not have, are left out), over a fake API server whose informers show what it holds.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from runtimekit.kube.objects import PersistentVolume, PersistentVolumeClaim
from runtimekit.model import NodeName, Placement, PodKey
from runtimekit.scheduler.framework.binding import Binding
from runtimekit.scheduler.framework.info import TaskStatus
from runtimekit.scheduler.framework.values import DeviceChoice
from runtimekit.scheduler.kubesem import volumebinding as vb
from runtimekit.scheduler.kubesem.volumes import VolumeCatalog, resource_version
from runtimekit.scheduler.plugins.predicates import VolumePredicates
from runtimekit.scheduler.plugins.volumes.assumed import AssumedVolumes, AssumeError, VolumeView
from runtimekit.scheduler.plugins.volumes.binder import Reserved, VolumeBinder
from scheduler.kubesem import volume_cases as cases
from scheduler.kubesem.builders import labelled
from scheduler.kubesem.volume_builders import NODE_KEY, catalog_of, pv, volume_pod
from scheduler.plugins.kube_harness import cache_of, plugin, session_of, task_of

SELECTED = "volume.kubernetes.io/selected-node"
POD = PodKey("uid-testns-test-pod")


class Conflict(Exception):
    pass


class FakeApi:
    """The API server's volumes and claims (a write with a stale resourceVersion is a conflict, as
    the apiserver answers), the informers' view of them (the same objects), node labels and pods.
    `later` runs at the first wait: what upstream's tests do after five seconds."""

    def __init__(
        self,
        volumes: Sequence[PersistentVolume] = (),
        claims: Sequence[PersistentVolumeClaim] = (),
        nodes: Mapping[str, Mapping[str, str]] | None = None,
        later: Callable[[FakeApi], None] | None = None,
    ) -> None:
        self.volumes = {v["metadata"]["name"]: copy.deepcopy(v) for v in volumes}
        self.claims = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": copy.deepcopy(c) for c in claims}
        self.nodes = dict(nodes if nodes is not None else {"node1": {NODE_KEY: "node1"}})
        self.pods = {POD}
        self.later = later
        self.version = 1
        self.writes: list[str] = []

    def _write(self, table: dict[str, Any], key: str, obj: Any) -> Any:
        current = table.get(key)
        if current is None:
            raise Conflict(f"{key} not found")
        if resource_version(obj) != resource_version(current):
            raise Conflict(f"Operation cannot be fulfilled on {key}: the object has been modified")
        new = copy.deepcopy(obj)
        new["metadata"]["resourceVersion"] = str(resource_version(current) + 1)
        table[key] = new
        self.version += 1
        self.writes.append(key)
        return new

    def update_volume(self, volume: PersistentVolume) -> PersistentVolume:
        return self._write(self.volumes, volume["metadata"]["name"], volume)  # type: ignore[no-any-return]

    def update_claim(self, claim: PersistentVolumeClaim) -> PersistentVolumeClaim:
        key = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
        return self._write(self.claims, key, claim)  # type: ignore[no-any-return]

    def catalog(self) -> VolumeCatalog:
        return catalog_of(self.claims.values(), self.volumes.values(), version=self.version)

    def node_labels(self, node: str) -> Mapping[str, str] | None:
        return self.nodes.get(node)

    def pod_exists(self, key: PodKey) -> bool:
        return key in self.pods

    def wait(self, version: int, timeout: float) -> bool:
        if self.later is not None:
            later, self.later = self.later, None
            later(self)
            self.version += 1
            return True
        time.sleep(min(timeout, 0.01))
        return True

    # what controllers do meanwhile (upstream's delay functions)
    def put_claim(self, claim: PersistentVolumeClaim) -> None:
        current = self.claims.get(f"{claim['metadata']['namespace']}/{claim['metadata']['name']}")
        fresh = copy.deepcopy(claim)
        fresh["metadata"]["resourceVersion"] = str(resource_version(current) + 1 if current else 1)
        self.claims[f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"] = fresh


def plan_of(
    bindings: Sequence[tuple[PersistentVolumeClaim, PersistentVolume]], provisions: Sequence[PersistentVolumeClaim]
) -> vb.VolumePlan:
    return vb.VolumePlan(tuple(vb.StaticBinding(c, v) for c, v in bindings), tuple(provisions))


# -- Reserve (AssumePodVolumes) and Unreserve ------------------------------------------------------
@pytest.mark.parametrize(("claims", "volumes", "bindings", "provisions", "fails", "expected"), cases.ASSUME)
def test_assume_pod_volumes(
    claims: list[PersistentVolumeClaim],
    volumes: list[PersistentVolume],
    bindings: list[tuple[PersistentVolumeClaim, PersistentVolume]],
    provisions: list[PersistentVolumeClaim],
    fails: bool,
    expected: dict[str, str | None],
) -> None:
    assumed = AssumedVolumes()
    binder = VolumeBinder(assumed)
    catalog = catalog_of(claims, volumes, cases.CLASSES)
    view = VolumeView(catalog, assumed)
    if fails:
        with pytest.raises(AssumeError):
            binder.assume("node1", plan_of(bindings, provisions), view)
    else:
        binder.assume("node1", plan_of(bindings, provisions), view)
    for name, claim in expected.items():
        found = view.volume(name)
        assert found is not None
        if claim is None:  # given back: the cache's object, as the informers show it
            assert found == catalog.volume(name)
        else:
            assert found["spec"]["claimRef"]["name"] == claim
    for claim in provisions:
        seen = view.claim(claim["metadata"]["namespace"], claim["metadata"]["name"])
        assert seen is not None
        assert (seen["metadata"].get("annotations") or {}).get(SELECTED) == (None if fails else "node1")


def test_all_bound_claims_have_nothing_to_assume() -> None:
    cache = cache_of([labelled("node1", {NODE_KEY: "node1"})])
    cache.volumes = catalog_of([cases.bound_pvc], [cases.pv_bound], cases.CLASSES)
    ssn = session_of(cache)
    predicates: VolumePredicates = plugin(ssn, VolumePredicates)
    task = task_of(volume_pod(claims=["bound-pvc"]))
    task.node = NodeName("node1")
    assert predicates.reserve(task, DeviceChoice(), ssn).ok
    assert predicates.binder is not None
    assert predicates.binder.plans == {}


def test_unreserve_gives_the_assumptions_back() -> None:
    """TestRevertAssumedPodVolumes: one binding and one claim to provision assumed, then reverted."""
    assumed = AssumedVolumes()
    binder = VolumeBinder(assumed)
    catalog = catalog_of([cases.unbound_pvc, cases.provisioned_pvc], [cases.pv_node1a], cases.CLASSES)
    view = VolumeView(catalog, assumed)
    task = task_of(volume_pod(claims=["unbound-pvc", "provisioned-pvc"]))
    binder.plans[task.key] = binder.assume(
        "node1", plan_of([(cases.unbound_pvc, cases.pv_node1a)], [cases.provisioned_pvc]), view
    )
    assert view.volume("pv-node1a")["spec"]["claimRef"]["name"] == "unbound-pvc"  # type: ignore[index]
    binder.unreserve(task)
    binder.unreserve(task)  # idempotent
    assert view.volume("pv-node1a") == cases.pv_node1a
    assert view.claim("testns", "provisioned-pvc") == cases.provisioned_pvc
    assert len(assumed) == 0


def test_an_assumption_gives_way_to_a_newer_api_object() -> None:
    assumed = AssumedVolumes()
    old = catalog_of([cases.unbound_pvc], [cases.pv_node1a])
    assumed.assume_volume(old, cases.pv_node1a_bound)
    assert VolumeView(old, assumed).volume("pv-node1a") == cases.pv_node1a_bound
    newer = catalog_of([cases.unbound_pvc], [cases.with_rv(cases.pv_node1a, "2")], version=2)
    assert VolumeView(newer, assumed).volume("pv-node1a")["metadata"]["resourceVersion"] == "2"  # type: ignore[index]
    assumed.prune(newer)
    assert len(assumed) == 0


# -- PreBind: the writes (bindAPIUpdate) ------------------------------------------------------------
@pytest.mark.parametrize(
    ("bindings", "api_volumes", "provisions", "api_claims", "fails", "volume_claims", "claim_nodes"),
    cases.BIND_API_UPDATE,
)
def test_bind_api_update(
    bindings: list[tuple[PersistentVolumeClaim, PersistentVolume]],
    api_volumes: list[PersistentVolume],
    provisions: list[PersistentVolumeClaim],
    api_claims: list[PersistentVolumeClaim],
    fails: bool,
    volume_claims: dict[str, str],
    claim_nodes: dict[str, str | None],
) -> None:
    api = FakeApi(api_volumes, api_claims)
    assumed = AssumedVolumes()
    binder = VolumeBinder(assumed)
    # the informers' view before the writes: upstream's cache holds every object at version 1
    cached = catalog_of(
        [c for c, _ in bindings] + [cases.with_rv(c, "1") for c in api_claims],
        [v for _, v in bindings if v["metadata"]["name"] not in api.volumes]
        + [cases.with_rv(v, "1") for v in api_volumes],
    )
    for _, volume in bindings:
        assumed.assume_volume(cached, volume)
    for claim in provisions:
        assumed.assume_claim(cached, cases.with_rv(claim, "1"))
    reserved = Reserved("node1", tuple(vb.StaticBinding(c, v) for c, v in bindings), tuple(provisions))
    written = binder.write(api, reserved)
    assert isinstance(written, str) is fails
    for name, claim in volume_claims.items():
        assert ((api.volumes[name]["spec"].get("claimRef") or {}).get("name")) == claim
    for key, node in claim_nodes.items():
        assert (api.claims[f"testns/{key}"]["metadata"].get("annotations") or {}).get(SELECTED) == node
    if fails:  # what was not written is no longer assumed
        view = VolumeView(cached, assumed)
        for name in volume_claims:
            if name not in api.writes:
                assert view.volume(name) == cached.volume(name)


# -- PreBind: the wait (checkBindings) --------------------------------------------------------------
@pytest.mark.parametrize(("bindings", "provisions", "volumes", "claims", "expected"), cases.CHECK_BINDINGS)
def test_check_bindings(
    bindings: list[tuple[PersistentVolumeClaim, PersistentVolume]],
    provisions: list[PersistentVolumeClaim],
    volumes: list[PersistentVolume],
    claims: list[PersistentVolumeClaim],
    expected: bool | str,
) -> None:
    got = vb.check_bindings(
        "node1",
        {NODE_KEY: "node1"},
        [vb.StaticBinding(c, v) for c, v in bindings],
        provisions,
        catalog_of(claims, volumes),
    )
    if expected == "error":
        assert isinstance(got, str)
    else:
        assert got is expected


# -- PreBind as a whole (BindPodVolumes) ------------------------------------------------------------
def _bind_static_later(api: FakeApi) -> None:
    claim = copy.deepcopy(cases.unbound_pvc)
    claim["spec"]["volumeName"] = "pv-node1a"
    claim["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    api.put_claim(claim)


def _provision_later(api: FakeApi) -> None:
    claim = copy.deepcopy(api.claims["testns/provisioned-pvc"])
    api.volumes["dynamic-pv"] = pv("dynamic-pv", "node1", "1G", claim=claim)
    claim["spec"]["volumeName"] = "dynamic-pv"
    claim["metadata"].setdefault("annotations", {})["pv.kubernetes.io/bind-completed"] = "yes"
    api.put_claim(claim)


def _delete_pod_later(api: FakeApi) -> None:
    api.pods.clear()


def _delete_claim_later(api: FakeApi) -> None:
    del api.claims["testns/unbound-pvc"]


def _bind_to_other_node_later(api: FakeApi) -> None:
    claim = copy.deepcopy(api.claims["testns/provisioned-pvc"])
    claim["spec"]["volumeName"] = "pv-node2"
    claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    api.put_claim(claim)


NODE1 = {"node1": {NODE_KEY: "node1"}}
NODES12 = {"node1": {NODE_KEY: "node1"}, "node2": {NODE_KEY: "node2"}}

# (volumes and claims the API holds, the binding and claim to provision assumed, what the API shows
#  before the bind (volume, claim), nodes, what happens later, the bind succeeds)
BIND_POD_VOLUMES = [
    pytest.param([], [], None, None, None, None, NODE1, None, True, id="nothing-to-bind-empty"),
    pytest.param(
        [cases.pv_node1a_bound],
        [cases.bound_pvc_node1a],
        (cases.unbound_pvc, cases.pv_node1a_bound),
        None,
        None,
        None,
        NODE1,
        None,
        True,
        id="already-bound",
    ),
    pytest.param(
        [cases.pv_node1a],
        [cases.unbound_pvc],
        (cases.unbound_pvc, cases.pv_node1a_bound),
        None,
        None,
        None,
        NODE1,
        _bind_static_later,
        True,
        id="binding-static-pv-succeeds-after-time",
    ),
    pytest.param(
        [],
        [cases.provisioned_pvc],
        None,
        cases.with_selected_node(cases.provisioned_pvc),
        None,
        None,
        NODE1,
        _provision_later,
        True,
        id="binding-dynamic-pv-succeeds-after-time",
    ),
    pytest.param(
        [cases.pv_node1a],
        [cases.unbound_pvc],
        (cases.unbound_pvc, cases.pv_node1a_bound),
        None,
        cases.pv_node1a_bound,
        cases.bound_pvc_node1a,
        NODE1,
        None,
        False,
        id="bound-by-pv-controller-before-bind",
    ),
    pytest.param(
        [cases.pv_node1a],
        [cases.unbound_pvc],
        (cases.unbound_pvc, cases.pv_node1a_bound),
        None,
        None,
        None,
        NODE1,
        _delete_pod_later,
        False,
        id="pod-deleted-after-time",
    ),
    pytest.param(
        [cases.pv_node1a],
        [cases.unbound_pvc],
        (cases.unbound_pvc, cases.pv_node1a_bound),
        None,
        None,
        None,
        NODE1,
        None,
        False,
        id="binding-times-out",
    ),
    pytest.param(
        [cases.pv_node1b],
        [cases.unbound_pvc2],
        (cases.unbound_pvc2, cases.pv_node1b_bound),
        None,
        None,
        None,
        NODE1,
        None,
        False,
        id="binding-fails",
    ),
    pytest.param(
        [cases.pv_node1a],
        [cases.unbound_pvc],
        (cases.unbound_pvc, cases.pv_node1a_bound),
        None,
        None,
        None,
        NODE1,
        _delete_claim_later,
        False,
        id="check-fails",
    ),
    pytest.param(
        [cases.pv_node1a_bound],
        [cases.bound_pvc_node1a],
        (cases.unbound_pvc, cases.pv_node1a_bound),
        None,
        None,
        None,
        {"node1": {}},
        None,
        False,
        id="node-affinity-fails",
    ),
    pytest.param(
        [cases.pv_node1a, cases.pv_node2],
        [cases.selected_node_pvc],
        None,
        cases.selected_node_pvc,
        None,
        None,
        NODES12,
        _bind_to_other_node_later,
        False,
        id="node-affinity-fails-dynamic-provisioning",
    ),
]


@pytest.mark.parametrize(
    ("volumes", "claims", "binding", "provision", "api_volume", "api_claim", "nodes", "later", "succeeds"),
    BIND_POD_VOLUMES,
)
def test_bind_pod_volumes(
    volumes: list[PersistentVolume],
    claims: list[PersistentVolumeClaim],
    binding: tuple[PersistentVolumeClaim, PersistentVolume] | None,
    provision: PersistentVolumeClaim | None,
    api_volume: PersistentVolume | None,
    api_claim: PersistentVolumeClaim | None,
    nodes: dict[str, dict[str, str]],
    later: Callable[[FakeApi], None] | None,
    succeeds: bool,
) -> None:
    api = FakeApi(volumes, claims, nodes, later)
    binder = VolumeBinder(AssumedVolumes(), bind_timeout=0.2)
    task = task_of(volume_pod())
    task.node, task.placement, task.status = NodeName("node1"), Placement(NodeName("node1"), 0, 0), TaskStatus.BINDING
    bindings = (vb.StaticBinding(*binding),) if binding else ()
    binder.plans[task.key] = Reserved("node1", bindings, (provision,) if provision else ())
    if api_volume is not None:
        api.volumes[api_volume["metadata"]["name"]] = cases.with_rv(api_volume, "2")
    if api_claim is not None:
        api.put_claim(api_claim)
    status = binder.pre_bind(Binding(task, NodeName("node1"), DeviceChoice(), volumes=api))
    assert status.ok is succeeds, status.message
    assert (task.key in binder.plans) is not succeeds


def test_pre_bind_without_an_api_server_fails_only_with_something_to_bind() -> None:
    binder = VolumeBinder(AssumedVolumes())
    task = task_of(volume_pod())
    task.node = NodeName("node1")
    assert binder.pre_bind(Binding(task, NodeName("node1"), DeviceChoice())).ok
    binder.plans[task.key] = Reserved("node1", (vb.StaticBinding(cases.unbound_pvc, cases.pv_node1a_bound),), ())
    assert not binder.pre_bind(Binding(task, NodeName("node1"), DeviceChoice())).ok


class StoppingApi(FakeApi):
    """The scheduler stops while PreBind waits for the PV controller."""

    def wait(self, version: int, timeout: float) -> bool:
        return False


def test_pre_bind_stops_waiting_when_the_scheduler_stops() -> None:
    api = StoppingApi([cases.pv_node1a], [cases.unbound_pvc], NODES12, None)
    binder = VolumeBinder(AssumedVolumes(), bind_timeout=600)
    task = task_of(volume_pod())
    task.node = NodeName("node1")
    binder.plans[task.key] = Reserved("node1", (vb.StaticBinding(cases.unbound_pvc, cases.pv_node1a_bound),), ())
    started = time.monotonic()
    status = binder.pre_bind(Binding(task, NodeName("node1"), DeviceChoice(), volumes=api))
    assert not status.ok
    assert "the scheduler is stopping" in status.message
    assert time.monotonic() - started < 5
