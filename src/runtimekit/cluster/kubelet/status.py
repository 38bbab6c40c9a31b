"""The Node and Pod status a simulated kubelet writes, as pure functions over `kube.objects` types.

Shapes follow what a real kubelet reports, so kubectl, the scheduler and the controller read them
unchanged: node conditions (Ready plus the three pressure conditions) with heartbeat times,
capacity and allocatable, addresses and nodeInfo; pod phase, conditions (Initialized, Ready,
ContainersReady, PodScheduled kept), the Ready conditions the containers' statuses make
(`lifecycle_status`; the statuses themselves come from `containers.py`), the `ContainerCreating`
status of a pod waiting for its volumes, and the rejection status of a pod that failed admission
(`reason`, `Pod was rejected: …`), and the health of the devices each container holds
(`with_resource_health`: `allocatedResourcesStatus`).
Callers: `SimulatedKubelet` (sends them as strategic merge patches of the status subresource).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runtimekit._version import __version__
from runtimekit.cluster.kubelet.admission import REJECTED
from runtimekit.kube.objects import (
    Condition,
    ContainerStatus,
    JsonObject,
    Node,
    NodeStatus,
    Pod,
    PodStatus,
    Quantity,
    ResourceStatus,
    meta,
)

KUBELET_VERSION = "v1.31.0-runtimekit"
CONTAINER_RUNTIME = f"simulated://{__version__}"


# -- nodes ---------------------------------------------------------------------------------------
def node_conditions(now: str, ready: bool = True) -> list[Condition]:
    def condition(kind: str, status: bool, reason: str, message: str) -> Condition:
        return {
            "type": kind,
            "status": "True" if status else "False",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    return [
        condition("MemoryPressure", False, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        condition("DiskPressure", False, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        condition("PIDPressure", False, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        condition(
            "Ready",
            ready,
            "KubeletReady" if ready else "KubeletNotReady",
            "kubelet is posting ready status" if ready else "kubelet is stopping",
        ),
    ]


def node_status(
    capacity: Mapping[str, Quantity], allocatable: Mapping[str, Quantity], now: str, address: str, hostname: str
) -> NodeStatus:
    return {
        "capacity": dict(capacity),
        "allocatable": dict(allocatable),
        "conditions": node_conditions(now),
        "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": hostname}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": hostname,
            "systemUUID": hostname,
            "bootID": hostname,
            "kernelVersion": "simulated",
            "osImage": "LJ RuntimeKit simulated node",
            "containerRuntimeVersion": CONTAINER_RUNTIME,
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def node_manifest(name: str, labels: Mapping[str, str], annotations: Mapping[str, str], status: NodeStatus) -> Node:
    base_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "simulated",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {**base_labels, **labels},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", **annotations},
        },
        "spec": {},
        "status": status,
    }


# -- pods ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Terminated:
    """How one container ended."""

    exit_code: int
    message: str = ""
    reason: str = ""

    def as_state(self, started: str, finished: str, container_id: str) -> JsonObject:
        """A ContainerStateTerminated (the `terminated` of a container's `state`)."""
        state: JsonObject = {
            "exitCode": self.exit_code,
            "reason": self.reason or ("Completed" if self.exit_code == 0 else "Error"),
            "startedAt": started,
            "finishedAt": finished,
            "containerID": container_id,
        }
        if self.message:
            state["message"] = self.message
        return state


def _condition(kind: str, status: bool, now: str, reason: str = "") -> Condition:
    out: Condition = {
        "type": kind,
        "status": "True" if status else "False",
        "lastProbeTime": None,
        "lastTransitionTime": now,
    }
    if reason:
        out["reason"] = reason
    return out


def container_id(pod_uid: str, container: str) -> str:
    return f"simulated://{pod_uid[:8]}-{container}"


def running_status(pod: Pod, now: str, host_ip: str, pod_ip: str) -> PodStatus:
    """Every container running and ready."""
    uid = str(meta(pod).get("uid", ""))
    statuses: list[ContainerStatus] = [
        {
            "name": c.get("name", ""),
            "image": c.get("image", ""),
            "imageID": "",
            "containerID": container_id(uid, str(c.get("name", ""))),
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": now}},
        }
        for c in (pod.get("spec") or {}).get("containers") or []
    ]
    return {
        "phase": "Running",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": now,
        "conditions": [
            _condition("PodReadyToStartContainers", True, now),
            _condition("Initialized", True, now),
            _condition("Ready", True, now),
            _condition("ContainersReady", True, now),
        ],
        "containerStatuses": statuses,
    }


def creating_status(pod: Pod, now: str, host_ip: str) -> PodStatus:
    """Admitted, its containers not started yet (kubelet waiting for its volumes): Pending, every
    container waiting `ContainerCreating`, which `kubectl get pods` shows as the pod's status."""
    statuses: list[ContainerStatus] = [
        {
            "name": c.get("name", ""),
            "image": c.get("image", ""),
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}},
        }
        for c in (pod.get("spec") or {}).get("containers") or []
    ]
    return {
        "phase": "Pending",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": now,
        "conditions": [
            _condition("PodReadyToStartContainers", False, now),
            _condition("Initialized", True, now),
            _condition("Ready", False, now, "ContainersNotReady"),
            _condition("ContainersReady", False, now, "ContainersNotReady"),
        ],
        "containerStatuses": statuses,
    }


def rejected_status(reason: str, message: str, now: str) -> PodStatus:
    """A pod that failed admission: Failed, with kubelet's reason and message."""
    return {"phase": "Failed", "reason": reason, "message": REJECTED + message, "startTime": now}


def phase_of(pod: Pod) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def container_names(pod: Pod) -> Sequence[str]:
    return [str(c.get("name", "")) for c in (pod.get("spec") or {}).get("containers") or []]


def lifecycle_status(statuses: list[ContainerStatus], phase: str | None, now: str) -> PodStatus:
    """The containers' statuses with the Ready conditions they make (Ready when every container
    runs), and the pod's phase once it is done (`PodCompleted`)."""
    ready = bool(statuses) and all(s.get("ready") for s in statuses)
    reason = "" if ready else ("PodCompleted" if phase else "ContainersNotReady")
    status: PodStatus = {
        "containerStatuses": statuses,
        "conditions": [_condition("Ready", ready, now, reason), _condition("ContainersReady", ready, now, reason)],
    }
    if phase:
        status["phase"] = phase
    return status


def with_resource_health(
    statuses: list[ContainerStatus], health: Mapping[str, list[ResourceStatus]]
) -> list[ContainerStatus]:
    """The containers' statuses with the health of what each holds (`allocatedResourcesStatus`)."""
    out: list[ContainerStatus] = []
    for status in statuses:
        held = health.get(str(status.get("name", "")))
        out.append({**status, "allocatedResourcesStatus": held} if held else status)
    return out
