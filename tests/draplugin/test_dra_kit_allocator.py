"""The two halves meet: claims allocated by the kit's structured allocator (kube.semantics.draalloc) on
the slices the plugin publishes are prepared by the plugin: NVIDIA's quickstart claims under NVIDIA's
driver names (a whole GPU; four MIG devices on one parent), and a share of a GPU by consumable capacity."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import yaml
from dra_helpers import NODE, DraStack

from runtimekit.draplugin.cdi import CdiWriter
from runtimekit.draplugin.checkpoint import Checkpoint
from runtimekit.draplugin.names import NVIDIA_NAMES, DraNames
from runtimekit.draplugin.publisher import desired_specs
from runtimekit.draplugin.service import ClaimRef, DraService
from runtimekit.kube.objects.dra import ResourceClaim, ResourceSlice
from runtimekit.kube.semantics.draalloc import allocate
from runtimekit.model import MigMode

DATA = Path(__file__).resolve().parents[1] / "data" / "nvidia-dra-quickstart"
Factory = Callable[..., DraStack]


def template_claim(file: str, uid: str) -> ResourceClaim:
    """The claim a quickstart file's template (or claim) makes, as the claim controller would."""
    for doc in yaml.safe_load_all((DATA / file).read_text()):
        if doc and doc["kind"] in ("ResourceClaimTemplate", "ResourceClaim"):
            spec = doc["spec"]["spec"] if doc["kind"] == "ResourceClaimTemplate" else doc["spec"]
            meta = {"name": f"claim-{uid}", "namespace": doc["metadata"]["namespace"], "uid": uid}
            return cast(ResourceClaim, {"metadata": meta, "spec": spec})
    raise AssertionError(file)


def allocate_and_prepare(stack: DraStack, names: DraNames, claim: ResourceClaim) -> tuple[Any, Any]:
    specs = desired_specs(names.driver, NODE, stack.devices.current())
    slices = [
        cast(
            ResourceSlice,
            {
                "metadata": {"name": n},
                "spec": {**s, "pool": {"name": NODE, "generation": 1, "resourceSliceCount": len(specs)}},
            },
        )
        for n, s in specs.items()
    ]
    classes = {c["metadata"].get("name", ""): c for c in names.device_classes()}
    allocation = allocate([claim], NODE, {}, classes, slices)
    assert allocation is not None
    claim["status"] = {"allocation": allocation[0]}
    stack.claims.add(claim)
    service = DraService(
        names.driver,
        NODE,
        stack.client,
        stack.claims,
        stack.devices,
        CdiWriter(stack.dir / "cdi", names.cdi_kind),
        Checkpoint(stack.dir / "state" / f"{names.driver}.json"),
    )
    meta = claim["metadata"]
    ref = ClaimRef(meta.get("namespace", ""), meta.get("uid", ""), meta.get("name", ""))
    return allocation[0], service.prepare([ref])[ref.uid]


def test_nvidias_single_gpu_claim(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="2xA100-40GB")
    allocation, prepared = allocate_and_prepare(stack, NVIDIA_NAMES, template_claim("gpu-test1.yaml", "u1"))
    assert [r["device"] for r in allocation["devices"]["results"]] == ["gpu-0"]
    assert prepared.error == ""
    (held,) = stack.client.list_allocations()
    assert held.shares[0].memory_mib == 40960


def test_nvidias_four_mig_devices_on_one_parent(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="2xA100-40GB", mig_modes={0: MigMode.DYNAMIC, 1: MigMode.DYNAMIC})
    allocation, prepared = allocate_and_prepare(stack, NVIDIA_NAMES, template_claim("gpu-test4.yaml", "u4"))
    devices = [r["device"] for r in allocation["devices"]["results"]]
    assert len({d.split("-mig-")[0] for d in devices}) == 1  # matchAttribute parentUUID
    assert prepared.error == ""
    made = sorted((m.profile, m.start) for d in stack.client.list_devices() for m in d.mig_devices if m.dynamic)
    assert [p for p, _ in made] == sorted(["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"])
    assert len(stack.client.list_allocations()) == 4  # one per request: each container names its own


def test_a_share_by_consumable_capacity(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="1xH200")
    names = DraNames("gpu.runtimekit.aliyun.com", "gpu.runtimekit.aliyun.com", "mig.runtimekit.aliyun.com")
    request = {
        "name": "gpu",
        "exactly": {"deviceClassName": names.gpu_class, "capacity": {"requests": {"core": "30", "memory": "8Gi"}}},
    }
    claim = cast(
        ResourceClaim,
        {"metadata": {"name": "s", "namespace": "default", "uid": "us"}, "spec": {"devices": {"requests": [request]}}},
    )
    allocation, prepared = allocate_and_prepare(stack, names, claim)
    (result,) = allocation["devices"]["results"]
    assert result["consumedCapacity"] == {"core": "30", "memory": "8Gi"}
    assert prepared.error == ""
    (held,) = stack.client.list_allocations()
    assert [(s.core_milli, s.memory_mib) for s in held.shares] == [(300, 8192)]
