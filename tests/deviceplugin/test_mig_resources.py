"""What the device plugin makes of MIG GPUs, as pure functions: one resource per profile, the device IDs
of static and dynamic GPUs, health, preferred IDs, matching by (GPU, profile, start), and the node
inventory the scheduler's ledger reads."""

from __future__ import annotations

from dp_helpers import NODE, PROTOCOL, RES, mig_pod

from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.deviceplugin.matching import Candidate, NoMatch, match, preferred_ids
from runtimekit.deviceplugin.publisher import inventory
from runtimekit.deviceplugin.resources import ResourceKind, ResourceSpec, advertised, gpu_of, resource_specs
from runtimekit.model import MigMode
from runtimekit.model.gpu import MigInstance
from runtimekit.runtime.devices import DeviceView
from runtimekit.runtime.grpc_api import device_message
from runtimekit.runtime.simulated import SimulatedBackend

# GPU 0 static (3g.40gb x2), GPU 1 dynamic, GPU 2 shared by time
BACKEND = SimulatedBackend(
    NODE,
    [("A100-80GB", 3)],
    mig_modes={0: MigMode.STATIC, 1: MigMode.DYNAMIC},
    mig_layouts={0: ["3g.40gb", "3g.40gb"]},
)
STATIC, DYNAMIC, SHARED = BACKEND.devices()
DEVICES = [device_message(DeviceView(d)) for d in BACKEND.devices()]


def mig_spec(profile: str) -> ResourceSpec:
    return ResourceSpec(RES.mig_prefix + profile, ResourceKind.MIG, profile)


def ids(spec: ResourceSpec, devices: list[pb.Device] = DEVICES) -> list[str]:
    return [d.id for d in advertised(spec, devices, PROTOCOL.memory_unit_mib)]


def test_one_resource_per_profile_offered() -> None:
    names = [s.name for s in resource_specs(DEVICES, PROTOCOL)]
    profiles = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]  # the dynamic GPU offers all
    assert names == [RES.gpu, RES.core, RES.memory, *(RES.mig_prefix + p for p in profiles)]
    static_only = [s.name for s in resource_specs([DEVICES[0], DEVICES[2]], PROTOCOL)]
    assert static_only == [RES.gpu, RES.core, RES.memory, RES.mig_prefix + "3g.40gb"]


def test_device_ids_of_static_and_dynamic_gpus() -> None:
    assert ids(mig_spec("3g.40gb")) == [
        *(m.uuid for m in STATIC.mig_devices),
        f"{DYNAMIC.uuid}::3g.40gb::0",
        f"{DYNAMIC.uuid}::3g.40gb::1",
    ]
    one = ids(mig_spec("1g.10gb"))
    assert one == [f"{DYNAMIC.uuid}::1g.10gb::{k}" for k in range(7)]  # as many as fit on the empty GPU
    assert {gpu_of(i) for i in one} == {DYNAMIC.uuid}
    assert ids(ResourceSpec(RES.gpu, ResourceKind.GPU)) == [SHARED.uuid]  # a MIG GPU is never shared by time
    assert ids(ResourceSpec(RES.core, ResourceKind.CORE))[0] == f"{SHARED.uuid}::0"


def test_mig_devices_follow_their_gpus_health() -> None:
    sick = [device_message(DeviceView(d, healthy=d.uuid == SHARED.uuid)) for d in BACKEND.devices()]
    health = {d.id: d.healthy for d in advertised(mig_spec("3g.40gb"), sick, PROTOCOL.memory_unit_mib)}
    assert set(health.values()) == {False}
    assert len(health) == 4


def test_preferred_ids_land_on_the_assigned_gpu_and_slices() -> None:
    pod = mig_pod("p", "1g.10gb", [(DYNAMIC.uuid, 1, 0, ""), (DYNAMIC.uuid, 1, 5, "")])
    found = match([pod], NODE, RES.mig_prefix + "1g.10gb", 2, PROTOCOL)
    assert isinstance(found, Candidate)
    other = [f"GPU-aaaa::1g.10gb::{k}" for k in range(7)]  # sorts first; a packing choice would take it
    available = other + ids(mig_spec("1g.10gb"))
    chosen = preferred_ids(ResourceKind.MIG, found.shares, available, [], 2)
    assert chosen == [f"{DYNAMIC.uuid}::1g.10gb::0", f"{DYNAMIC.uuid}::1g.10gb::1"]
    static = mig_pod("s", "3g.40gb", [(STATIC.uuid, 0, 4, STATIC.mig_devices[1].uuid)])
    found = match([static], NODE, RES.mig_prefix + "3g.40gb", 1, PROTOCOL)
    assert isinstance(found, Candidate)
    assert preferred_ids(ResourceKind.MIG, found.shares, ids(mig_spec("3g.40gb")), [], 1) == [
        STATIC.mig_devices[1].uuid
    ]


def test_matching_needs_the_assigned_slices_of_the_profile() -> None:
    resource = RES.mig_prefix + "1g.10gb"
    short = mig_pod("short", "1g.10gb", [(DYNAMIC.uuid, 1, 0, "")], count=2, assume=1)
    good = mig_pod("good", "1g.10gb", [(DYNAMIC.uuid, 1, 2, ""), (DYNAMIC.uuid, 1, 3, "")], assume=2)
    found = match([short, good], NODE, resource, 2, PROTOCOL)
    assert isinstance(found, Candidate)
    assert found.name == "good"
    missing = match([short], NODE, resource, 2, PROTOCOL)
    assert isinstance(missing, NoMatch)
    assert "assigned 1 1g.10gb slices, asks 2" in missing.reason


def test_the_inventory_carries_static_layouts_with_starts() -> None:
    gpus = inventory(NODE, DEVICES).gpus
    assert [g.mig_mode for g in gpus] == [MigMode.STATIC, MigMode.DYNAMIC, MigMode.OFF]
    assert gpus[0].mig_devices == tuple(MigInstance(m.uuid, "3g.40gb", m.start) for m in STATIC.mig_devices)
    assert [m.start for m in gpus[0].mig_devices] == [0, 4]
    assert gpus[1].mig_devices == ()  # dynamic devices live as long as their pods
