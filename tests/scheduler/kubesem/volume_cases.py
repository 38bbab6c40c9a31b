"""kube-scheduler's volume tables, as our data: the facts of `volumebinding/binder_test.go` and
`volume_binding_test.go`, `volumezone/volume_zone_test.go`, `nodevolumelimits/csi_test.go` and
`volumerestrictions/volume_restrictions_test.go` (objects, incoming pod, expected outcome).

Where upstream's fake listers word a NotFound error in the plural (`storageclasses.storage.k8s.io`,
`persistentvolumeclaims`), the expectation here is the real lister's singular, as kube-scheduler
prints it in a cluster. Cases upstream writes with nil slices (a Go distinction the kit's typed
plans do not have), with CSIStorageCapacity, VolumeAttachments, CSI migration of bound volumes'
node affinity or score shapes are not translated (see the tests' docstrings for the counts).
"""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.kube.objects import PersistentVolume, PersistentVolumeClaim
from runtimekit.scheduler.kubesem import volumebinding as vb
from runtimekit.scheduler.kubesem import volumelimits, volumerestrictions, volumezone
from scheduler.kubesem.volume_builders import IMMEDIATE, NODE_KEY, csinode, pv, pvc, sc, volume_pod

Json = dict[str, Any]
HOST = "kubernetes.io/hostname"

# -- binder_test.go ------------------------------------------------------------------------------
PROVISIONER = "test-provisioner"
CLASSES = [
    sc("waitClassWithProvisioner", provisioner=PROVISIONER, topologies=[{NODE_KEY: ["node1", "reference-value"]}]),
    sc("immediateClass", IMMEDIATE),
    sc("waitClass", provisioner="kubernetes.io/no-provisioner"),
    sc("topoMismatchClass", provisioner=PROVISIONER, topologies=[{NODE_KEY: ["reference-value"]}]),
]
unbound_pvc = pvc("unbound-pvc", "1G")
unbound_pvc2 = pvc("unbound-pvc2", "5G")
prebound_pvc = pvc("prebound-pvc", "1G", volume="pv-node1a")
prebound_pvc_node1a = pvc("unbound-pvc", "1G", volume="pv-node1a")
bound_pvc = pvc("bound-pvc", "1G", volume="pv-bound", bound=True)
bound_pvc_node1a = pvc("unbound-pvc", "1G", volume="pv-node1a", bound=True)
immediate_unbound_pvc = pvc("immediate-unbound-pvc", "1G", "immediateClass")
immediate_bound_pvc = pvc("immediate-bound-pvc", "1G", "immediateClass", volume="pv-bound-immediate", bound=True)
provisioned_pvc = pvc("provisioned-pvc", "1Gi", "waitClassWithProvisioner")
provisioned_pvc2 = pvc("provisioned-pvc2", "1Gi", "waitClassWithProvisioner")
provisioned_pvc_higher = pvc("provisioned-pvc2", "1Gi", "waitClassWithProvisioner", rv="2")
provisioned_pvc_bound = pvc("provisioned-pvc", "1Gi", "waitClassWithProvisioner", volume="pv-bound", bound=True)
no_provisioner_pvc = pvc("no-provisioner-pvc", "1Gi", "waitClass")
topo_mismatch_pvc = pvc("topo-mismatch-pvc", "1Gi", "topoMismatchClass")
selected_node_pvc = pvc("provisioned-pvc", "1Gi", "waitClassWithProvisioner", selected_node="node1")
POD_UID = "uid-testns-test-pod"
correct_generic_pvc = pvc(
    "test-pod-test-volume", "1G", "immediateClass", volume="pv-bound", bound=True, owner_uid=POD_UID
)
conflicting_generic_pvc = pvc("test-pod-test-volume", "1G", "immediateClass", volume="pv-bound", bound=True)
pv_bound_generic = pv("pv-bound", "node1", "1G", claim=correct_generic_pvc)
pv_node1a = pv("pv-node1a", "node1", "5G")
pv_node1b = pv("pv-node1b", "node1", "10G")
pv_node1c = pv("pv-node1b", "node1", "5G")  # upstream names it pv-node1b too
pv_node2 = pv("pv-node2", "node2", "1G")
pv_bound = pv("pv-bound", "node1", "1G", claim=bound_pvc)
pv_node1a_bound = pv("pv-node1a", "node1", "5G", claim=unbound_pvc)
pv_node1b_bound = pv("pv-node1b", "node1", "10G", claim=unbound_pvc2)
pv_node1b_bound_higher = pv("pv-node1b", "node1", "10G", claim=unbound_pvc2, rv="2")
pv_bound_immediate = pv("pv-bound-immediate", "node1", "1G", "immediateClass", claim=immediate_bound_pvc)
pv_bound_immediate_node2 = pv("pv-bound-immediate", "node2", "1G", "immediateClass", claim=immediate_bound_pvc)


def binding(claim: PersistentVolumeClaim, volume: PersistentVolume) -> tuple[str, str]:
    """An expected binding: (claim name, volume name)."""
    return claim["metadata"]["name"], volume["metadata"]["name"]


FAILS = "fails"  # the pod fails on every node for a reason of its claims (upstream: an error)


def _find(name: str, claims: list[PersistentVolumeClaim], volumes: list[PersistentVolume], **kw: Any) -> Any:
    return pytest.param(
        kw.get("pod"),
        claims,
        kw.get("cached", claims),
        volumes,
        kw.get("reason", ""),
        kw.get("bindings", []),
        kw.get("provisions", []),
        id=name,
    )


# (pod or None for one using `claims`, claims of the pod, claims the cache holds, volumes,
#  reason on node1 ("" fits, FAILS for a claims problem), bindings, claims provisioned)
FIND_POD_VOLUMES = [
    _find("no-volumes", [], [], pod=volume_pod()),
    _find(
        "no-pvcs",
        [],
        [],
        pod={**volume_pod(), "spec": {"containers": [{"name": "c"}], "volumes": [{"name": "e", "emptyDir": {}}]}},
    ),
    _find("pvc-not-found", [bound_pvc], [], cached=[], reason=FAILS),
    _find("bound-pvc", [bound_pvc], [pv_bound]),
    _find("bound-pvc,pv-not-exists", [bound_pvc], [], reason=vb.PV_NOT_EXIST),
    _find("prebound-pvc", [prebound_pvc], [pv_node1a_bound], reason=FAILS),
    _find(
        "unbound-pvc,pv-same-node",
        [unbound_pvc],
        [pv_node2, pv_node1a, pv_node1b],
        bindings=[binding(unbound_pvc, pv_node1a)],
    ),
    _find("unbound-pvc,pv-different-node", [unbound_pvc], [pv_node2], reason=vb.BIND_CONFLICT),
    _find(
        "two-unbound-pvcs",
        [unbound_pvc, unbound_pvc2],
        [pv_node1a, pv_node1b],
        bindings=[binding(unbound_pvc, pv_node1a), binding(unbound_pvc2, pv_node1b)],
    ),
    _find(
        "two-unbound-pvcs,order-by-size",
        [unbound_pvc2, unbound_pvc],
        [pv_node1a, pv_node1b],
        bindings=[binding(unbound_pvc, pv_node1a), binding(unbound_pvc2, pv_node1b)],
    ),
    _find("two-unbound-pvcs,partial-match", [unbound_pvc, unbound_pvc2], [pv_node1a], reason=vb.BIND_CONFLICT),
    _find(
        "one-bound,one-unbound",
        [unbound_pvc, bound_pvc],
        [pv_bound, pv_node1a],
        bindings=[binding(unbound_pvc, pv_node1a)],
    ),
    _find("one-bound,one-unbound,no-match", [unbound_pvc, bound_pvc], [pv_bound, pv_node2], reason=vb.BIND_CONFLICT),
    _find("one-prebound,one-unbound", [unbound_pvc, prebound_pvc], [pv_node1a, pv_node1b], reason=FAILS),
    _find("immediate-bound-pvc", [immediate_bound_pvc], [pv_bound_immediate]),
    _find("immediate-bound-pvc-wrong-node", [immediate_bound_pvc], [pv_bound_immediate_node2], reason=vb.NODE_CONFLICT),
    _find("immediate-unbound-pvc", [immediate_unbound_pvc], [], reason=FAILS),
    _find("immediate-unbound-pvc,delayed-mode-bound", [immediate_unbound_pvc, bound_pvc], [pv_bound], reason=FAILS),
    _find("immediate-unbound-pvc,delayed-mode-unbound", [immediate_unbound_pvc, unbound_pvc], [], reason=FAILS),
    _find("generic-ephemeral,no-pvc", [], [], pod=volume_pod(ephemeral=["no-such-pvc"]), reason=FAILS),
    _find(
        "generic-ephemeral,with-pvc",
        [],
        [pv_bound_generic],
        pod=volume_pod(ephemeral=["test-volume"]),
        cached=[correct_generic_pvc],
    ),
    _find(
        "generic-ephemeral,wrong-pvc",
        [],
        [pv_bound_generic],
        pod=volume_pod(ephemeral=["test-volume"]),
        cached=[conflicting_generic_pvc],
        reason=FAILS,
    ),
    # TestFindPodVolumesWithProvisioning
    _find("one-provisioned", [provisioned_pvc], [], provisions=["provisioned-pvc"]),
    _find(
        "two-unbound-pvcs,one-matched,one-provisioned",
        [unbound_pvc, provisioned_pvc],
        [pv_node1a],
        bindings=[binding(unbound_pvc, pv_node1a)],
        provisions=["provisioned-pvc"],
    ),
    _find("one-bound,one-provisioned", [bound_pvc, provisioned_pvc], [pv_bound], provisions=["provisioned-pvc"]),
    _find("one-binding,one-selected-node", [bound_pvc, selected_node_pvc], [pv_bound], provisions=["provisioned-pvc"]),
    _find("provisioning:immediate-unbound-pvc", [immediate_unbound_pvc], [], reason=FAILS),
    _find(
        "one-immediate-bound,one-provisioned",
        [immediate_bound_pvc, provisioned_pvc],
        [pv_bound_immediate],
        provisions=["provisioned-pvc"],
    ),
    _find("invalid-provisioner", [no_provisioner_pvc], [], reason=vb.BIND_CONFLICT),
    _find("volume-topology-unsatisfied", [topo_mismatch_pvc], [], reason=vb.BIND_CONFLICT),
]

# TestAssumePodVolumes: (claims of the pod and the cache, volumes the cache holds, bindings to assume,
# claims to provision, fails, the volumes' claims once assumed (name -> claim name, or None when
# the assumption must have been undone))
ASSUME = [
    pytest.param(
        [unbound_pvc],
        [pv_node1a],
        [(unbound_pvc, pv_node1a)],
        [],
        False,
        {"pv-node1a": "unbound-pvc"},
        id="one-binding",
    ),
    pytest.param(
        [unbound_pvc, unbound_pvc2],
        [pv_node1a, pv_node1b],
        [(unbound_pvc, pv_node1a), (unbound_pvc2, pv_node1b)],
        [],
        False,
        {"pv-node1a": "unbound-pvc", "pv-node1b": "unbound-pvc2"},
        id="two-bindings",
    ),
    pytest.param(
        [unbound_pvc],
        [pv_node1a_bound],
        [(unbound_pvc, pv_node1a_bound)],
        [],
        False,
        {"pv-node1a": "unbound-pvc"},
        id="pv-already-bound",
    ),
    pytest.param(
        [unbound_pvc],
        [pv_node1a],
        [(unbound_pvc, pv_node1a), (unbound_pvc2, pv_node1b)],
        [],
        True,
        {"pv-node1a": None},
        id="tmpupdate-failed",
    ),
    pytest.param(
        [unbound_pvc, provisioned_pvc],
        [pv_node1a],
        [(unbound_pvc, pv_node1a)],
        [provisioned_pvc],
        False,
        {"pv-node1a": "unbound-pvc"},
        id="one-binding, one-pvc-provisioned",
    ),
    pytest.param(
        [unbound_pvc, provisioned_pvc_higher],
        [pv_node1a],
        [(unbound_pvc, pv_node1a)],
        [provisioned_pvc2],
        True,
        {"pv-node1a": None},
        id="one-binding, one-provision-tmpupdate-failed",
    ),
]


def with_selected_node(
    claim: PersistentVolumeClaim, node: str = "node1", rv: str | None = None
) -> PersistentVolumeClaim:
    import copy

    out = copy.deepcopy(claim)
    out["metadata"].setdefault("annotations", {})["volume.kubernetes.io/selected-node"] = node
    if rv is not None:
        out["metadata"]["resourceVersion"] = rv
    return out


def with_rv(obj: Any, rv: str) -> Any:
    import copy

    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = rv
    return out


def without_claim_uid(volume: PersistentVolume) -> PersistentVolume:
    import copy

    out = copy.deepcopy(volume)
    out["spec"]["claimRef"]["uid"] = ""
    return out


# TestBindAPIUpdate: (bindings (claim, volume as assumed), volumes the API holds, claims to provision
# (as assumed), claims the API holds, fails, volume name -> claim its API object names after,
# claim name -> selected node its API object carries after)
BIND_API_UPDATE = [
    pytest.param([], [], [], [], False, {}, {}, id="nothing-to-bind-empty"),
    pytest.param(
        [(unbound_pvc, pv_node1a_bound)], [pv_node1a], [], [], False, {"pv-node1a": "unbound-pvc"}, {}, id="one-binding"
    ),
    pytest.param(
        [(unbound_pvc, pv_node1a_bound), (unbound_pvc2, pv_node1b_bound)],
        [pv_node1a, pv_node1b],
        [],
        [],
        False,
        {"pv-node1a": "unbound-pvc", "pv-node1b": "unbound-pvc2"},
        {},
        id="two-bindings",
    ),
    pytest.param(
        [(unbound_pvc, pv_node1a_bound)],
        [pv_node1a_bound],
        [],
        [],
        False,
        {"pv-node1a": "unbound-pvc"},
        {},
        id="api-already-updated",
    ),
    pytest.param(
        [(unbound_pvc, pv_node1a_bound), (unbound_pvc2, pv_node1b_bound)],
        [pv_node1a, pv_node1b_bound_higher],
        [],
        [],
        True,
        {"pv-node1a": "unbound-pvc", "pv-node1b": "unbound-pvc2"},
        {},
        id="api-update-failed",
    ),
    pytest.param(
        [],
        [],
        [with_selected_node(provisioned_pvc)],
        [provisioned_pvc],
        False,
        {},
        {"provisioned-pvc": "node1"},
        id="one-provisioned-pvc",
    ),
    pytest.param(
        [],
        [],
        [with_selected_node(provisioned_pvc), with_selected_node(provisioned_pvc2)],
        [provisioned_pvc, provisioned_pvc_higher],
        True,
        {},
        {"provisioned-pvc": "node1", "provisioned-pvc2": None},
        id="provision-api-update-failed",
    ),
    pytest.param(
        [(unbound_pvc, pv_node1a_bound)],
        [pv_node1a],
        [with_selected_node(provisioned_pvc), with_selected_node(provisioned_pvc2)],
        [provisioned_pvc, provisioned_pvc_higher],
        True,
        {"pv-node1a": "unbound-pvc"},
        {"provisioned-pvc": "node1", "provisioned-pvc2": None},
        id="binding-succeed, provision-api-update-failed",
    ),
]

# TestCheckBindings: (bindings (claim, volume as written), claims provisioned (as written), volumes
# and claims the informers show, expected: True bound, False not yet, "error")
CHECK_BINDINGS = [
    pytest.param([], [], [], [], True, id="nothing-to-bind"),
    pytest.param([(unbound_pvc, pv_node1a_bound)], [], [pv_node1a_bound], [bound_pvc_node1a], True, id="binding-bound"),
    pytest.param(
        [(unbound_pvc, pv_node1a_bound)], [], [pv_node1a_bound], [prebound_pvc_node1a], False, id="binding-prebound"
    ),
    pytest.param([(unbound_pvc, pv_node1a_bound)], [], [pv_node1a_bound], [unbound_pvc], False, id="binding-unbound"),
    pytest.param([(unbound_pvc, pv_node1a_bound)], [], [pv_node1a_bound], [], "error", id="binding-pvc-not-exists"),
    pytest.param([(unbound_pvc, pv_node1a_bound)], [], [], [bound_pvc_node1a], "error", id="binding-pv-not-exists"),
    pytest.param(
        [(unbound_pvc, pv_node1a_bound)],
        [],
        [with_rv(pv_node1a, "2")],
        [with_rv(bound_pvc_node1a, "2")],
        "error",
        id="binding-claimref-nil",
    ),
    pytest.param(
        [(unbound_pvc, pv_node1a_bound)],
        [],
        [with_rv(without_claim_uid(pv_node1a_bound), "2")],
        [with_rv(bound_pvc_node1a, "2")],
        "error",
        id="binding-claimref-uid-empty",
    ),
    pytest.param(
        [(unbound_pvc, pv_node1a_bound), (unbound_pvc2, pv_node1b_bound)],
        [],
        [pv_node1a_bound, pv_node1b_bound],
        [bound_pvc_node1a, unbound_pvc2],
        False,
        id="binding-one-bound,one-unbound",
    ),
    pytest.param(
        [],
        [with_selected_node(provisioned_pvc)],
        [pv_bound],
        [with_selected_node(provisioned_pvc_bound, rv="2")],
        True,
        id="provisioning-pvc-bound",
    ),
    pytest.param(
        [],
        [with_selected_node(provisioned_pvc)],
        [],
        [with_selected_node(provisioned_pvc)],
        False,
        id="provisioning-pvc-unbound",
    ),
    pytest.param([], [with_selected_node(provisioned_pvc)], [], [], "error", id="provisioning-pvc-not-exists"),
    pytest.param(
        [],
        [with_selected_node(provisioned_pvc)],
        [],
        [with_rv(provisioned_pvc, "2")],
        "error",
        id="provisioning-pvc-annotations-nil",
    ),
    pytest.param(
        [],
        [with_selected_node(provisioned_pvc)],
        [],
        [
            {
                **with_rv(provisioned_pvc, "2"),
                "metadata": {**with_rv(provisioned_pvc, "2")["metadata"], "annotations": {}},
            }
        ],
        "error",
        id="provisioning-pvc-selected-node-dropped",
    ),
    pytest.param(
        [],
        [with_selected_node(provisioned_pvc)],
        [],
        [with_selected_node(provisioned_pvc, "wrong-node", rv="2")],
        "error",
        id="provisioning-pvc-selected-node-wrong-node",
    ),
    pytest.param(
        [(unbound_pvc, pv_node1a_bound)],
        [with_selected_node(provisioned_pvc)],
        [pv_node1a_bound],
        [bound_pvc_node1a, with_selected_node(provisioned_pvc)],
        False,
        id="binding-bound-provisioning-unbound",
    ),
    pytest.param(
        [],
        [with_selected_node(provisioned_pvc)],
        [],
        [with_selected_node(provisioned_pvc_bound, rv="2")],
        False,
        id="tolerate-provisioning-pvc-bound-pv-not-found",
    ),
]

# -- volume_binding_test.go (the plugin's table; filter outcomes) ---------------------------------
PLUGIN_CLASSES = [sc("immediate-sc", IMMEDIATE), sc("wait-sc"), sc("wait-hdd-sc")]


def _pvc(
    name: str, cls: str, volume: str = "", size: str | None = None, phase: str | None = None
) -> PersistentVolumeClaim:
    return pvc(
        name,
        size,
        cls,
        ns="default",
        volume=volume,
        bound=bool(volume),
        rv="",
        uid=f"uid-{name}",
        phase=phase,
        volume_mode=None,
    )


def _pv(name: str, cls: str, phase: str | None = None) -> PersistentVolume:
    return pv(name, "", None, cls, phase=phase, volume_mode=None)


def _hostname(name: str) -> tuple[str, dict[str, str]]:
    return name, {HOST: name}


def _zonal(name: str, region: str, zone: str) -> tuple[str, dict[str, str]]:
    return name, {HOST: name, "topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone}


def _local_pvs(cls: str, node: str, size: str, *names: str) -> list[PersistentVolume]:
    return [pv(n, "", size, cls, phase="Available", affinity={HOST: [node]}, volume_mode=None) for n in names]


def _zonal_pvs(size: str, region: str, zone: str, *names: str) -> list[PersistentVolume]:
    pins = {"topology.kubernetes.io/region": [region], "topology.kubernetes.io/zone": [zone]}
    return [pv(n, "", size, "wait-sc", phase="Available", affinity=pins, volume_mode=None) for n in names]


ZONAL_NODES = [
    _zonal("zone-a-node-a", "region-a", "zone-a"),
    _zonal("zone-a-node-b", "region-a", "zone-a"),
    _zonal("zone-b-node-a", "region-b", "zone-b"),
    _zonal("zone-b-node-b", "region-b", "zone-b"),
    _zonal("zone-c-node-a", "region-c", "zone-c"),
    _zonal("zone-c-node-b", "region-c", "zone-c"),
]
ZONAL_PVS = _zonal_pvs("200Gi", "region-a", "zone-a", "pv-a-0", "pv-a-1") + _zonal_pvs(
    "100Gi", "region-b", "zone-b", "pv-b-0", "pv-b-1"
)
LOCAL_PVS = _local_pvs("wait-sc", "node-a", "200Gi", "pv-a-0", "pv-a-1") + _local_pvs(
    "wait-sc", "node-b", "100Gi", "pv-b-0", "pv-b-1"
)
LOCAL_HDD_PVS = _local_pvs("wait-hdd-sc", "node-a", "200Gi", "pv-a-2", "pv-a-3") + _local_pvs(
    "wait-hdd-sc", "node-b", "100Gi", "pv-b-2", "pv-b-3"
)
ABC = [_hostname("node-a"), _hostname("node-b"), _hostname("node-c")]
BIND = vb.BIND_CONFLICT


def pod_of(*claims: str) -> Json:
    return volume_pod("pod-a", claims, ns="default")


# (nodes (name, labels), pod, claims, volumes, reason per failing node)
PLUGIN_FILTER = [
    pytest.param([_hostname("node-a")], pod_of(), [], [], {}, id="pod has not pvcs"),
    pytest.param(
        [_hostname("node-a")],
        pod_of("pvc-a"),
        [_pvc("pvc-a", "wait-sc", "pv-a")],
        [_pv("pv-a", "wait-sc", phase="Available")],
        {},
        id="all bound",
    ),
    pytest.param(
        [_hostname("node-a")],
        pod_of("pvc-a", "pvc-b"),
        [_pvc("pvc-a", "wait-sc", "pv-a"), _pvc("pvc-b", "wait-sc", "pv-b")],
        [
            pv("pv-a", "", None, "wait-sc", phase="Bound", affinity={HOST: ["node-a"]}, volume_mode=None),
            pv("pv-b", "", None, "wait-sc", phase="Bound", affinity={HOST: ["node-a"]}, volume_mode=None),
        ],
        {},
        id="all bound with local volumes",
    ),
    pytest.param(
        [_hostname("node-a")],
        pod_of("pvc-a"),
        [],
        [],
        {"node-a": 'persistentvolumeclaim "pvc-a" not found'},
        id="PVC does not exist",
    ),
    pytest.param(
        [_hostname("node-a")],
        pod_of("pvc-a", "pvc-b"),
        [_pvc("pvc-a", "wait-sc", "pv-a")],
        [],
        {"node-a": 'persistentvolumeclaim "pvc-b" not found'},
        id="Part of PVCs do not exist",
    ),
    pytest.param(
        [_hostname("node-a")],
        pod_of("pvc-a"),
        [_pvc("pvc-a", "immediate-sc")],
        [],
        {"node-a": vb.UNBOUND_IMMEDIATE},
        id="immediate claims not bound",
    ),
    pytest.param(
        [_hostname("node-a")],
        pod_of("pvc-a"),
        [_pvc("pvc-a", "wait-sc")],
        [],
        {"node-a": BIND},
        id="unbound claims no matches",
    ),
    pytest.param(
        [("node-a", {HOST: "node-a", "foo": "barbar"})],
        pod_of("pvc-a", "pvc-b"),
        [_pvc("pvc-a", "wait-sc", "pv-a"), _pvc("pvc-b", "wait-sc")],
        [pv("pv-a", "", None, "wait-sc", phase="Available", affinity={"foo": ["bar"]}, volume_mode=None)],
        {"node-a": vb.NODE_CONFLICT},  # upstream reports the bind conflict too; a row here shows its first reason
        id="bound and unbound unsatisfied",
    ),
    pytest.param(
        [_hostname("node-a")],
        pod_of("pvc-a"),
        [],
        [],
        {"node-a": 'persistentvolumeclaim "pvc-a" not found'},
        id="pvc not found",
    ),
    pytest.param(
        [_hostname("node-a")],
        pod_of("pvc-a"),
        [_pvc("pvc-a", "wait-sc", "pv-a")],
        [],
        {"node-a": vb.PV_NOT_EXIST},
        id="pv not found",
    ),
    pytest.param(
        [_hostname("node-a")],
        pod_of("pvc-a"),
        [_pvc("pvc-a", "wait-sc", "pv-a", phase="Lost")],
        [],
        {"node-a": 'persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"'},
        id="pv not found claim lost",
    ),
    pytest.param(
        ABC,
        pod_of("pvc-a"),
        [_pvc("pvc-a", "wait-sc", size="50Gi")],
        LOCAL_PVS,
        {"node-c": BIND},
        id="local volumes with close capacity are preferred",
    ),
    pytest.param(
        ABC,
        pod_of("pvc-0", "pvc-1"),
        [_pvc("pvc-0", "wait-sc", size="50Gi"), _pvc("pvc-1", "wait-hdd-sc", size="100Gi")],
        LOCAL_PVS + LOCAL_HDD_PVS,
        {"node-c": BIND},
        id="local volumes with close capacity are preferred (multiple pvcs)",
    ),
    pytest.param(
        ZONAL_NODES,
        pod_of("pvc-a"),
        [_pvc("pvc-a", "wait-sc", size="50Gi")],
        ZONAL_PVS,
        {"zone-c-node-a": BIND, "zone-c-node-b": BIND},
        id="zonal volumes with close capacity are preferred",
    ),
    pytest.param(
        ZONAL_NODES,
        pod_of("pvc-a"),
        [_pvc("pvc-a", "wait-sc", size="50Gi")],
        ZONAL_PVS,
        {"zone-c-node-a": BIND, "zone-c-node-b": BIND},
        id="zonal volumes with close capacity are preferred (custom shape)",
    ),
]

# -- volume_zone_test.go --------------------------------------------------------------------------
BETA_ZONE, BETA_REGION = volumezone.BETA_ZONE, volumezone.BETA_REGION
GA_ZONE, GA_REGION = volumezone.ZONE, volumezone.REGION


def _zone_pv(name: str, labels: dict[str, str]) -> PersistentVolume:
    return pv(name, "", None, "", phase=None, labels=labels, volume_mode=None)


def _zone_pvc(name: str, volume: str = "", cls: str | None = None) -> PersistentVolumeClaim:
    return pvc(name, None, cls, ns="default", volume=volume, bound=bool(volume), uid=f"uid-{name}", volume_mode=None)


SINGLE_ZONE_PVS = [
    _zone_pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
    _zone_pv("Vol_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}),
    _zone_pv("Vol_3", {BETA_REGION: "us-west1"}),
    _zone_pv("Vol_Stable_1", {GA_ZONE: "us-west1-a"}),
    _zone_pv("Vol_Stable_2", {GA_REGION: "us-west1", "uselessLabel": "none"}),
    _zone_pv("Vol_Stable_3", {GA_ZONE: "us-west1-a", GA_REGION: "us-west1-a"}),
]
SINGLE_ZONE_PVCS = [
    _zone_pvc("PVC_1", "Vol_1"),
    _zone_pvc("PVC_2", "Vol_2"),
    _zone_pvc("PVC_3", "Vol_3"),
    _zone_pvc("PVC_4", "Vol_not_exist"),
    _zone_pvc("PVC_Stable_1", "Vol_Stable_1"),
    _zone_pvc("PVC_Stable_2", "Vol_Stable_2"),
    _zone_pvc("PVC_Stable_3", "Vol_Stable_3"),
]
MULTI_ZONE_PVS = [
    _zone_pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
    _zone_pv("Vol_2", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
    _zone_pv("Vol_3", {BETA_ZONE: "us-west1-c__us-west1-a"}),
    _zone_pv("Vol_Stable_1", {GA_ZONE: "us-west1-a"}),
    _zone_pv("Vol_Stable_2", {GA_ZONE: "us-west1-c__us-west1-a"}),
]
MULTI_ZONE_PVCS = [p for p in SINGLE_ZONE_PVCS if p["metadata"]["name"] != "PVC_Stable_3"]
WITH_BINDING_CLASSES = [sc("Class_Immediate", None), sc("Class_Wait")]
WITH_BINDING_PVCS = [
    _zone_pvc("PVC_1", "Vol_1"),
    _zone_pvc("PVC_NoSC", cls="Class_0"),
    _zone_pvc("PVC_EmptySC"),
    _zone_pvc("PVC_WaitSC", cls="Class_Wait"),
    _zone_pvc("PVC_ImmediateSC", cls="Class_Immediate"),
]
CONFLICT = volumezone.REASON
USELESS = {"uselessLabel": "none"}


def _zone(name: str, claim: str, labels: dict[str, str], expected: str = "", table: str = "single") -> Any:
    return pytest.param(table, claim, labels, expected, id=f"{table}: {name}")


# (table: which objects, the pod's claim ("" for none), node labels, reason ("" fits))
ZONE = [
    _zone("pod without volume", "", {BETA_ZONE: "us-west1-a"}),
    _zone("node without labels", "PVC_1", {}),
    _zone("beta zone label matched", "PVC_1", {BETA_ZONE: "us-west1-a", **USELESS}),
    _zone("beta region label matched", "PVC_2", {BETA_REGION: "us-west1", **USELESS}),
    _zone("beta region label doesn't match", "PVC_2", {BETA_REGION: "no_us-west1", **USELESS}, CONFLICT),
    _zone("beta zone label doesn't match", "PVC_1", {BETA_ZONE: "no_us-west1-a", **USELESS}, CONFLICT),
    _zone("zone label matched", "PVC_Stable_1", {GA_ZONE: "us-west1-a", **USELESS}),
    _zone("region label matched", "PVC_Stable_2", {GA_REGION: "us-west1", **USELESS}),
    _zone("region label doesn't match", "PVC_Stable_2", {GA_REGION: "no_us-west1", **USELESS}, CONFLICT),
    _zone("zone label doesn't match", "PVC_Stable_1", {GA_ZONE: "no_us-west1-a", **USELESS}, CONFLICT),
    _zone("pv with zone and region, node with only zone", "PVC_Stable_3", {GA_ZONE: "us-west1-a"}, CONFLICT),
    _zone("pv with zone,node with beta zone", "PVC_Stable_1", {BETA_ZONE: "us-west1-a"}, CONFLICT),
    _zone("pv with beta label,node with ga label, matched", "PVC_1", {GA_ZONE: "us-west1-a"}),
    _zone("pv with beta label,node with ga label, don't match", "PVC_1", {GA_ZONE: "us-west1-b"}, CONFLICT),
    _zone("node without labels", "PVC_3", {}, table="multi"),
    _zone("beta zone label matched", "PVC_3", {BETA_ZONE: "us-west1-a", **USELESS}, table="multi"),
    _zone("beta zone label doesn't match", "PVC_1", {BETA_ZONE: "us-west1-b", **USELESS}, CONFLICT, "multi"),
    _zone("zone label matched", "PVC_Stable_2", {GA_ZONE: "us-west1-a", **USELESS}, table="multi"),
    _zone("zone label doesn't match", "PVC_Stable_1", {GA_ZONE: "us-west1-b", **USELESS}, CONFLICT, "multi"),
    _zone("label zone failure domain matched", "PVC_1", {BETA_ZONE: "us-west1-a", **USELESS}, table="binding"),
    _zone(
        "unbound volume empty storage class",
        "PVC_EmptySC",
        {BETA_ZONE: "us-west1-a", **USELESS},
        "PersistentVolumeClaim had no pv name and storageClass name",
        "binding",
    ),
    _zone(
        "unbound volume no storage class",
        "PVC_NoSC",
        {BETA_ZONE: "us-west1-a", **USELESS},
        'storageclass.storage.k8s.io "Class_0" not found',
        "binding",
    ),
    _zone(
        "unbound volume immediate binding mode",
        "PVC_ImmediateSC",
        {BETA_ZONE: "us-west1-a", **USELESS},
        'VolumeBindingMode not set for StorageClass "Class_Immediate"',
        "binding",
    ),
    _zone("unbound volume wait binding mode", "PVC_WaitSC", {BETA_ZONE: "us-west1-a", **USELESS}, table="binding"),
]

# -- csi_test.go -----------------------------------------------------------------------------------
EBS, GCE = "ebs.csi.aws.com", "pd.csi.storage.gke.io"
EBS_IN_TREE, HOSTPATH = "kubernetes.io/aws-ebs", "kubernetes.io/hostpath"
MAX = volumelimits.MAX_COUNT
CSI_NODE = "node-for-max-pd-test-1"


def csi_objects(drivers: list[str]) -> tuple[list[PersistentVolumeClaim], list[PersistentVolume]]:
    """Upstream's fake listers: per driver, volumes and claims `csi-<driver>-<0..3>`; and claims
    `csi-4` (class csi-sc, unbound), `csi-5` (no class) and `csi-6` (class csi-sc, a missing volume)."""
    claims, volumes = [], []
    for driver in drivers:
        for j in range(4):
            name = f"csi-{driver}-{j}"
            if driver == EBS_IN_TREE:
                source: tuple[str, Json] = ("awsElasticBlockStore", {"volumeID": name})
                volumes.append(pv(name, "", None, "", phase=None, source=source, volume_mode=None))
            elif driver == HOSTPATH:
                volumes.append(
                    pv(name, "", None, "", phase=None, source=("hostPath", {"path": "/tmp"}), volume_mode=None)
                )
            else:
                volumes.append(pv(name, "", None, "", phase=None, csi=(driver, name), volume_mode=None))
            claims.append(pvc(name, None, None, ns="default", volume=name, uid=f"uid-{name}", volume_mode=None))
    claims.append(pvc("csi-4", None, "csi-sc", ns="default", uid="uid-csi-4", volume_mode=None))
    claims.append(pvc("csi-5", None, None, ns="default", uid="uid-csi-5", volume_mode=None))
    claims.append(
        pvc("csi-6", None, "csi-sc", ns="default", volume="missing-in-action", uid="uid-csi-6", volume_mode=None)
    )
    return claims, volumes


def _csi_pod(name: str, *claims: str) -> Json:
    return volume_pod(name, claims, ns="default")


running = _csi_pod("running", f"csi-{EBS}-3")
pending = _csi_pod("pending", "csi-4")
unbound2 = _csi_pod("unbound2", "csi-4")
missing_pv = _csi_pod("missing-pv", "csi-6")
no_sc = _csi_pod("no-sc", "csi-5")
gce_two = _csi_pod("gce-two", f"csi-{GCE}-1", f"csi-{GCE}-2")
in_tree_one = _csi_pod("in-tree-one", f"csi-{EBS_IN_TREE}-0")
in_tree_two = _csi_pod("in-tree-two", f"csi-{EBS_IN_TREE}-1", f"csi-{EBS_IN_TREE}-2")
ebs_one = _csi_pod("ebs-one", f"csi-{EBS}-0")
ebs_two = _csi_pod("ebs-two", f"csi-{EBS}-1", f"csi-{EBS}-2")
non_migratable = _csi_pod("non-migratable", f"csi-{HOSTPATH}-0")
ephemeral = volume_pod("abc", ns="test", uid="12345", ephemeral=["xyz"])
ephemeral_two = volume_pod("abc", ns="test", uid="12345II", ephemeral=["x", "y"])
ephemeral_claim = pvc("abc-xyz", None, "csi-sc", ns="test", uid="uid-abc-xyz", owner_uid="12345", volume_mode=None)
conflicting_claim = pvc("abc-xyz", None, "csi-sc", ns="test", uid="uid-abc-xyz", volume_mode=None)
ephemeral_claim_x = pvc("abc-x", None, "csi-sc", ns="test", uid="uid-abc-x", owner_uid="12345II", volume_mode=None)
ephemeral_claim_y = pvc("abc-y", None, "csi-sc", ns="test", uid="uid-abc-y", owner_uid="12345II", volume_mode=None)
inline_ebs = volume_pod("inline", ns="default", inline=[("awsElasticBlockStore", {"volumeID": "aws-inline1"})])
inline_same_id = volume_pod(
    "inline-same", ns="default", inline=[("awsElasticBlockStore", {"volumeID": f"csi-{EBS}-1"})]
)
CONFIG_AND_SECRET = [{"name": "cm", "configMap": {"name": "x"}}, {"name": "s", "secret": {"secretName": "y"}}]


def _plus_config(manifest: Json) -> Json:
    import copy

    out = copy.deepcopy(manifest)
    out["spec"]["volumes"] = CONFIG_AND_SECRET + out["spec"].get("volumes", [])
    return out


only_config_and_secret = _plus_config(volume_pod("config", ns="default"))
ephemeral_lookup_failed = 'looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found'


def _csi(
    name: str, new: Json, existing: list[Json], drivers: list[str], limits: str, max_vols: int = 0, **kw: Any
) -> Any:
    return pytest.param(new, existing, drivers, limits, max_vols, kw.get("claims", []), kw.get("expected", ""), id=name)


# (incoming pod, pods on the node, drivers, limit source (csinode, csinode-with-no-limit, none),
#  the count per driver, extra claims, reason ("" fits))
CSI_LIMITS = [
    _csi("fits when node volume limit >= new pods CSI volume", ebs_one, [running, ebs_two], [EBS], "csinode", 4),
    _csi(
        "doesn't when node volume limit <= pods CSI volume",
        ebs_one,
        [running, ebs_two],
        [EBS],
        "csinode",
        2,
        expected=MAX,
    ),
    _csi(
        "should when driver does not support volume limits",
        ebs_one,
        [running, ebs_two],
        [EBS],
        "csinode-with-no-limit",
        2,
    ),
    _csi(
        "count pending PVCs towards volume limit <= pods CSI volume",
        ebs_one,
        [pending, ebs_two],
        [EBS],
        "csinode",
        2,
        expected=MAX,
    ),
    _csi(
        "count multiple pending pvcs towards volume limit >= pods CSI volume",
        ebs_one,
        [pending, unbound2, ebs_two],
        [EBS],
        "csinode",
        4,
    ),
    _csi(
        "should count PVCs with invalid PV name but valid SC",
        ebs_one,
        [missing_pv, ebs_two],
        [EBS],
        "csinode",
        2,
        expected=MAX,
    ),
    _csi("don't count pvcs with missing SC towards volume limit", ebs_one, [running, no_sc], [EBS], "csinode", 2),
    _csi(
        "count pvcs with the same type towards volume limit",
        ebs_one,
        [gce_two, ebs_two],
        [EBS, GCE],
        "csinode",
        2,
        expected=MAX,
    ),
    _csi(
        "don't count pvcs with different type towards volume limit",
        gce_two,
        [ebs_two, running],
        [EBS, GCE],
        "csinode",
        2,
    ),
    _csi(
        "should count in-tree volumes if migration is enabled",
        in_tree_one,
        [in_tree_two],
        [EBS_IN_TREE, EBS],
        "csinode",
        2,
        expected=MAX,
    ),
    _csi("nil csi node", inline_ebs, [in_tree_two], [EBS_IN_TREE, EBS], "none"),
    _csi(
        "should count unbound in-tree volumes if migration is enabled",
        pending,
        [in_tree_two],
        [EBS_IN_TREE, EBS],
        "csinode",
        2,
        expected=MAX,
    ),
    _csi(
        "should not limit pod if volume used does not report limits",
        in_tree_one,
        [in_tree_two],
        [EBS_IN_TREE, EBS],
        "csinode-with-no-limit",
        2,
    ),
    _csi("should not count non-migratable in-tree volumes", non_migratable, [ebs_two], [HOSTPATH, EBS], "csinode", 2),
    _csi(
        "should count in-tree inline volumes if migration is enabled",
        inline_ebs,
        [in_tree_two],
        [EBS_IN_TREE, EBS],
        "csinode",
        2,
        expected=MAX,
    ),
    _csi(
        "should count in-tree and csi volumes if migration is enabled (when scheduling in-tree volumes)",
        in_tree_one,
        [ebs_two],
        [EBS_IN_TREE, EBS],
        "csinode",
        2,
        expected=MAX,
    ),
    _csi(
        "should count in-tree, inline and csi volumes if migration is enabled (when scheduling in-tree volumes)",
        inline_ebs,
        [ebs_two, in_tree_one],
        [EBS_IN_TREE, EBS],
        "csinode",
        3,
        expected=MAX,
    ),
    _csi(
        "should not count in-tree, inline and csi volumes if migration is enabled (when scheduling in-tree volumes)",
        inline_same_id,
        [ebs_two, in_tree_one],
        [EBS_IN_TREE, EBS],
        "csinode",
        3,
    ),
    _csi(
        "should count in-tree and csi volumes if migration is enabled (when scheduling csi volumes)",
        ebs_one,
        [in_tree_two],
        [EBS_IN_TREE, EBS],
        "csinode",
        2,
        expected=MAX,
    ),
    _csi("ephemeral volume missing", ephemeral, [], [EBS], "csinode-with-no-limit", expected=ephemeral_lookup_failed),
    _csi(
        "ephemeral volume not owned",
        ephemeral,
        [],
        [EBS],
        "csinode-with-no-limit",
        claims=[conflicting_claim],
        expected="PVC test/abc-xyz was not created for pod test/abc (pod is not owner)",
    ),
    _csi("ephemeral volume unbound", ephemeral, [], [EBS], "csinode-with-no-limit", claims=[ephemeral_claim]),
    _csi(
        "ephemeral doesn't when node volume limit <= pods CSI volume",
        ephemeral,
        [running, ebs_two],
        [EBS],
        "csinode",
        2,
        claims=[ephemeral_claim],
        expected=MAX,
    ),
    _csi(
        "ephemeral doesn't when node volume limit <= pods ephemeral CSI volume",
        ebs_one,
        [running, ephemeral_two],
        [EBS],
        "csinode",
        2,
        claims=[ephemeral_claim_x, ephemeral_claim_y],
        expected=MAX,
    ),
    _csi(
        "persistent doesn't when node volume limit <= pods ephemeral CSI volume + persistent volume, "
        "ephemeral disabled",
        ebs_one,
        [running, ephemeral, ebs_two],
        [EBS],
        "csinode",
        3,
        claims=[ephemeral_claim],
        expected=MAX,
    ),
    _csi(
        "persistent doesn't when node volume limit <= pods ephemeral CSI volume + persistent volume",
        ebs_one,
        [running, ephemeral, ebs_two],
        [EBS],
        "csinode",
        3,
        claims=[ephemeral_claim],
        expected=MAX,
    ),
    _csi(
        "persistent okay when node volume limit > pods ephemeral CSI volume + persistent volume",
        ebs_one,
        [running, ephemeral, ebs_two],
        [EBS],
        "csinode",
        5,
        claims=[ephemeral_claim],
    ),
    _csi("skip Filter when the pod only uses secrets and configmaps", only_config_and_secret, [], [EBS], "csinode", 2),
    _csi("don't skip Filter when the pod has pvcs", _plus_config(ebs_one), [], [EBS], "csinode", 2),
    _csi(
        "don't skip Filter when the pod has ephemeral volumes",
        _plus_config(ephemeral),
        [],
        [EBS],
        "csinode-with-no-limit",
        expected=ephemeral_lookup_failed,
    ),
    _csi(
        "don't skip Filter when the pod has inline migratable volumes",
        _plus_config(inline_ebs),
        [in_tree_two],
        [EBS_IN_TREE, EBS],
        "csinode",
        2,
        expected=MAX,
    ),
]


def csi_limits_node(source: str, max_vols: int, drivers: list[str]) -> list[Any]:
    if source == "none":
        return []
    count = max_vols if source == "csinode" else None
    return [csinode(CSI_NODE, dict.fromkeys(drivers, count), migrated=EBS_IN_TREE)]


# -- volume_restrictions_test.go ------------------------------------------------------------------
GCE_FOO = ("gcePersistentDisk", {"pdName": "foo"})
GCE_BAR = ("gcePersistentDisk", {"pdName": "bar"})
AWS_FOO = ("awsElasticBlockStore", {"volumeID": "foo"})
AWS_BAR = ("awsElasticBlockStore", {"volumeID": "bar"})
RBD_AB = ("rbd", {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"})
RBD_CD = ("rbd", {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"})
ISCSI_16 = (
    "iscsi",
    {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01", "fsType": "ext4", "lun": 0},
)
ISCSI_17 = (
    "iscsi",
    {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2017-12.server:storage.target01", "fsType": "ext4", "lun": 0},
)
DISK = volumerestrictions.DISK_CONFLICT


def _disk_pod(name: str, *inline: tuple[str, Json]) -> Json:
    return volume_pod(name, ns="default", inline=inline)


def _disks(kind: str, same: tuple[str, Json], other: tuple[str, Json]) -> list[Any]:
    out = [
        pytest.param(_disk_pod("p"), [], "", id=f"{kind}: nothing"),
        pytest.param(_disk_pod("p"), [_disk_pod("e", same)], "", id=f"{kind}: one state"),
        pytest.param(_disk_pod("p", same), [_disk_pod("e", same)], DISK, id=f"{kind}: same state"),
        pytest.param(_disk_pod("p", other), [_disk_pod("e", same)], "", id=f"{kind}: different state"),
    ]
    if kind == "gce":
        no_restriction = volume_pod("p", ns="default")
        no_restriction["spec"]["volumes"] = [{"name": "volume with no restriction"}]
        out.append(pytest.param(no_restriction, [], "", id=f"{kind}: pod with a volume that doesn't have restrictions"))
    return out


# (incoming pod, pods on the node, reason ("" fits))
DISK_CONFLICTS = [
    *_disks("gce", GCE_FOO, GCE_BAR),
    *_disks("aws", AWS_FOO, AWS_BAR),
    *_disks("rbd", RBD_AB, RBD_CD),
    *_disks("iscsi", ISCSI_16, ISCSI_17),
]
RWOP_1 = pvc("claim-with-rwop-1", None, None, ns="default", uid="u1", modes=["ReadWriteOncePod"], volume_mode=None)
RWOP_2 = pvc("claim-with-rwop-2", None, None, ns="default", uid="u2", modes=["ReadWriteOncePod"], volume_mode=None)
RWX = pvc("claim-with-rwx", None, None, ns="default", uid="u3", modes=["ReadWriteMany"], volume_mode=None)
with_one = volume_pod("pod-with-one-pvc", ["claim-with-rwop-1"], ns="default", node="node-1")
with_two = volume_pod("pod-with-two-pvcs", ["claim-with-rwop-1", "claim-with-rwop-2"], ns="default", node="node-1")
one_conflict = volume_pod("pod-with-one-conflict", ["claim-with-rwop-1"], ns="default")
two_conflicts = volume_pod("pod-with-two-conflicts", ["claim-with-rwop-1", "claim-with-rwop-2"], ns="default")
with_rwx = volume_pod("pod-with-rwx", ["claim-with-rwx"], ns="default", node="node-1")
RWOP = volumerestrictions.RWOP_CONFLICT

# (incoming pod, pods on node-1, claims, reason on node-1 ("" fits))
ACCESS_MODES = [
    pytest.param(volume_pod("p", ns="default"), [], [], "", id="nothing"),
    pytest.param(
        volume_pod("pod-with-one-pvc", ["claim-with-rwop-1"], ns="default"),
        [],
        [],
        'persistentvolumeclaim "claim-with-rwop-1" not found',
        id="failed to get PVC",
    ),
    pytest.param(
        volume_pod("pod-with-one-pvc", ["claim-with-rwop-1"], ns="default"),
        [with_rwx],
        [RWOP_1, RWX],
        "",
        id="no access mode conflict",
    ),
    pytest.param(one_conflict, [with_one, with_rwx], [RWOP_1, RWX], RWOP, id="access mode conflict, unschedulable"),
    pytest.param(two_conflicts, [with_two, with_rwx], [RWOP_1, RWOP_2, RWX], RWOP, id="two conflicts, unschedulable"),
]
