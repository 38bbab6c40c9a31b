"""Trace replay through ResourceClaims: every pod asks for its GPUs through a claim of the kit's GPU
DeviceClass instead of the device plugin's resources, the nodes publish their GPUs as ResourceSlices,
and the scheduler's `dynamicresources` plugin allocates the claims (`runtimekit simulate
--through-claims`).

- `DraPublication`: what the nodes publish, handed in by the caller (the command line builds it
  from the DRA plugin's own slice and DeviceClass builders; the simulator never imports the plugin):
  the GPU DeviceClass's name, the DeviceClasses, and a node inventory's ResourceSlices.
- `ClaimSide`: one replay's DRA objects. Per pod shape a ResourceClaimTemplate (whole GPUs by
  `count`; a share as consumable capacity `core`, percent of a GPU, and `memory`, the trace's GPU
  memory: none); per arriving pod the claim the template controller would make, named in the pod's
  `status.resourceClaimStatuses`. The objects go into the replay cache's `DraStore` (the live
  scheduler's, frozen into a catalog per session), and PreBind's writes go straight into it
  (`SimClaims`), as the live scheduler reads its own writes. A pod that did not place has its claim
  deleted, as the controller deletes a claim no pod will use.

Callers: `sim.replay` (the replay loop), `runtimekit simulate`, benchmarks, tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from runtimekit.kube.objects import DeviceClass, KubeObject, Pod, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from runtimekit.kube.objects.dra import ExactDeviceRequest
from runtimekit.kube.semantics.quantity import parse_quantity
from runtimekit.model import NodeInventory, PodKey, PodRequest
from runtimekit.model.trace import TracePod
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.cache.dra import CLAIMS, CLASSES, SLICES, DraStore
from runtimekit.scheduler.framework import TaskInfo, TaskStatus
from runtimekit.scheduler.framework.info import JobKey
from runtimekit.scheduler.kubesem.drarequest import with_claims

NAMESPACE = "default"
REQUEST = "gpu"  # the claim's request, and the pod's `spec.resourceClaims` entry
MIB = 1 << 20
MODELS_ANNOTATION = KitProtocol.default().annotations.gpu_models
WHOLE = KitProtocol.default().rules.memory_default == "whole"  # a share naming no memory takes all of it


@dataclass(frozen=True)
class DraPublication:
    """How the simulated nodes' GPUs appear through DRA (see the module docstring). `slices` must be
    a module-level function: runs in worker processes carry it by name."""

    driver: str
    gpu_class: str
    classes: tuple[DeviceClass, ...]
    slices: Callable[[NodeInventory], list[ResourceSlice]]

    def node_slices(self, inventories: Sequence[NodeInventory]) -> tuple[ResourceSlice, ...]:
        return tuple(s for inventory in inventories if inventory.gpus for s in self.slices(inventory))


def claim_template(pod: TracePod, gpu_class: str, name: str) -> ResourceClaimTemplate:
    """The template a workload of this pod's shape would name: `num_gpu` whole GPUs, or a share of
    one (`core` in percent of the GPU: the trace's milli-GPU over ten; `memory` none). No selector:
    the GPU models a `gpu_spec` allows are the pod's model annotation, as on the device-plugin path
    (the scheduler places a claim with selectors by the allocator alone, not by the kit's policies)."""
    exactly: ExactDeviceRequest = {
        "deviceClassName": gpu_class,
        "allocationMode": "ExactCount",
        "count": pod.num_gpu,
    }
    if pod.gpu_milli < 1000:
        exactly["capacity"] = {"requests": {"core": _percent(pod.gpu_milli), "memory": "0"}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [{"name": REQUEST, "exactly": exactly}]}}},
    }


def _percent(milli: int) -> str:
    whole, rest = divmod(milli, 10)
    return str(whole) if not rest else f"{milli * 100}m"  # 47.5 % is 47500m


class SimClaims:
    """The `ClaimAccess` PreBind writes through: the replay's store, updated at once."""

    def __init__(self, store: DraStore) -> None:
        self.store = store

    def claim(self, key: str) -> ResourceClaim | None:
        return self.store.claim(key)

    def update_status(self, claim: ResourceClaim) -> ResourceClaim:
        self.store.apply(CLAIMS, "MODIFIED", cast("KubeObject", claim))
        return claim


@dataclass(frozen=True)
class ClaimedGpu:
    """One device of an allocated claim: the GPU's UUID and the share of it the claim holds (milli)."""

    uuid: str
    milli: int


class ClaimSide:
    """One replay's DRA objects (see the module docstring)."""

    def __init__(self, publication: DraPublication, slices: tuple[ResourceSlice, ...], store: DraStore) -> None:
        self.publication = publication
        self.store = store
        for device_class in publication.classes:
            store.apply(CLASSES, "ADDED", cast("KubeObject", device_class))
        for published in slices:
            store.apply(SLICES, "ADDED", cast("KubeObject", published))
        self.access = SimClaims(store)
        self.templates: dict[tuple[int, int, str], ResourceClaimTemplate] = {}
        self._uuids: dict[tuple[str, str, str], str] | None = None

    def task(self, index: int, pod: TracePod, request: PodRequest, models: frozenset[str] | None) -> TaskInfo:
        """The arriving pod as a task: its CPU and memory as asked, its GPUs through a claim (made now
        from its shape's template, as the claim controller would before the pod is scheduled), the
        GPU models it allows as the kit's model annotation."""
        uid = f"{pod.name}-{index}"
        job_key = JobKey(pod.name)
        manifest: Pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod.name, "namespace": NAMESPACE, "uid": uid},
            "spec": {"containers": [{"name": "main"}]},
        }
        if models is not None:
            manifest["metadata"]["annotations"] = {MODELS_ANNOTATION: "|".join(sorted(models))}
        if pod.num_gpu and pod.gpu_milli:
            template = self._template(pod)
            name = f"{uid}-{REQUEST}"
            template_name = str(template["metadata"].get("name", ""))
            claim: ResourceClaim = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": name,
                    "namespace": NAMESPACE,
                    "uid": name,
                    "annotations": {"resource.kubernetes.io/pod-claim-name": REQUEST},
                },
                "spec": template["spec"]["spec"],
            }
            self.store.apply(CLAIMS, "ADDED", cast("KubeObject", claim))
            manifest["spec"]["resourceClaims"] = [{"name": REQUEST, "resourceClaimTemplateName": template_name}]
            manifest["spec"]["containers"] = [{"name": "main", "resources": {"claims": [{"name": REQUEST}]}}]
            manifest["status"] = {"resourceClaimStatuses": [{"name": REQUEST, "resourceClaimName": name}]}
        # the claims of the kit's GPU class as the pod's GPU request, as the live cache's snapshot reads a
        # pending pod (`kubesem.drarequest`): gpushare's policy places them, dynamicresources allocates
        asked = with_claims(PodRequest(request.cpu_milli, request.memory_bytes), manifest, self.store.claims(), WHOLE)
        return TaskInfo(
            PodKey(pod.name),
            NAMESPACE,
            pod.name,
            job_key,
            asked,
            created=float(index),
            gpu_models=models,
            pod=manifest,
            uid=uid,
        )

    def _template(self, pod: TracePod) -> ResourceClaimTemplate:
        shape = (pod.num_gpu, pod.gpu_milli, pod.gpu_spec)
        found = self.templates.get(shape)
        if found is None:
            name = f"gpu-{pod.num_gpu}x{pod.gpu_milli}-{len(self.templates)}"
            found = self.templates[shape] = claim_template(pod, self.publication.gpu_class, name)
        return found

    def settle(self, task: TaskInfo) -> None:
        """After the pod's session: a pod that did not place gives its claim up."""
        claim = self.store.claim(f"{NAMESPACE}/{task.uid}-{REQUEST}")
        if task.status is not TaskStatus.BOUND and claim is not None:
            self.store.apply(CLAIMS, "DELETED", cast("KubeObject", claim))

    def devices(self, task: TaskInfo) -> tuple[ClaimedGpu, ...]:
        """The GPUs the pod's claim was allocated, in the allocation's order (none without a claim)."""
        claim = self.store.claim(f"{NAMESPACE}/{task.uid}-{REQUEST}")
        allocation = ((claim or {}).get("status") or {}).get("allocation")
        if allocation is None:
            return ()
        uuids = self._uuid_of()
        out = []
        for result in (allocation.get("devices") or {}).get("results") or []:
            key = (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
            consumed = {n.rpartition("/")[2]: v for n, v in (result.get("consumedCapacity") or {}).items()}
            milli = int(parse_quantity(consumed["core"]) * 10) if "core" in consumed else 1000
            out.append(ClaimedGpu(uuids.get(key, ""), milli))
        return tuple(out)

    def _uuid_of(self) -> dict[tuple[str, str, str], str]:
        if self._uuids is None:
            by_uuid = self.store.frozen().by_uuid  # the slices do not change during a replay
            self._uuids = {key: uuid for uuid, keys in by_uuid.items() for key in keys}
        return self._uuids
