"""MIG in the runtime service and over gRPC: dynamic devices made at Allocate (idempotently), destroyed at
Release, kept across restarts, collected when leaked, released by reconciliation; static layouts; mixed
nodes; every refusal with its code and reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest
from runtime_helpers import NODE, FakeClock, RuntimeFactory, pod_manifest

from runtimekit.api.runtime_client import RuntimeCallError, Share
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.model import Assignment, GpuShare, GpuUUID, MigMode, NodeName, simulated_uuid
from runtimekit.runtime.allocations import PodRef
from runtimekit.runtime.pods import StaticPods
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend
from runtimekit.runtime.values import AllocateInput

A100, H200 = simulated_uuid(NODE, 0), simulated_uuid(NODE, 1)
MIXED = {"gpus": "1xA100-80GB,1xH200", "mig_modes": {0: MigMode.DYNAMIC}}
Mig = tuple[str, str, int]  # (GPU, profile, start)


def mig(uid: str, *slots: Mig, container: str = "main", uuid: str = "") -> AllocateInput:
    shares = tuple(Share(uuid, 0, 0, gpu, profile, start) for gpu, profile, start in slots)
    return AllocateInput(PodRef("default", f"pod-{uid}", uid), container, shares)


def share(uid: str, gpu: str, core: int, memory: int) -> AllocateInput:
    return AllocateInput(PodRef("default", f"pod-{uid}", uid), "main", (Share(gpu, core, memory),))


def backend(runtime: NodeRuntime) -> SimulatedBackend:
    assert isinstance(runtime.backend, SimulatedBackend)
    return runtime.backend


def instances(runtime: NodeRuntime, index: int = 0) -> list[tuple[str, int]]:
    """What the GPU really has (the backend), and the runtime's own view agrees."""
    real = [(m.profile, m.start) for m in backend(runtime).devices()[index].mig_devices]
    seen = [(m.profile, m.start) for m in runtime.device_snapshot().devices[index].info.mig_devices]
    assert seen == real
    return real


def refused(call: Callable[[], object]) -> ServiceError:
    with pytest.raises(ServiceError) as exc:
        call()
    return exc.value


def test_allocate_makes_the_device_and_release_destroys_it(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(**MIXED)
    generation = runtime.device_snapshot().generation
    result = runtime.allocate(mig("u1", (A100, "3g.40gb", 4)))
    (grant,) = result.allocation.grants
    assert (grant.parent_uuid, grant.mig_profile, grant.mig_start, grant.mig_dynamic) == (A100, "3g.40gb", 4, True)
    assert grant.uuid.startswith("MIG-")
    assert grant.memory_mib == 40192
    assert instances(runtime) == [("3g.40gb", 4)]
    assert runtime.device_snapshot().generation > generation  # WatchDevices streams see the new device
    edits = result.edits
    assert edits.envs == {"NVIDIA_VISIBLE_DEVICES": grant.uuid}
    assert edits.cdi_devices == (f"nvidia.com/gpu={grant.uuid}",)
    made = backend(runtime).devices()[0].mig_devices[0]
    paths = [d.host_path for d in edits.devices]
    assert paths[0] == "/dev/nvidia0"
    assert paths[-2:] == list(made.cap_paths)
    assert runtime.release("u1")
    assert instances(runtime) == []


def test_a_repeated_allocate_returns_the_same_device(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(**MIXED)
    first = runtime.allocate(mig("u1", (A100, "1g.10gb", 2), (A100, "1g.10gb", 3)))
    again = runtime.allocate(mig("u1", (A100, "1g.10gb", 3), (A100, "1g.10gb", 2)))
    assert again.allocation.grants == first.allocation.grants
    assert instances(runtime) == [("1g.10gb", 2), ("1g.10gb", 3)]
    assert [g.mig_start for g in first.allocation.grants] == [2, 3]  # device ordinals follow the slices
    assert first.edits.envs["NVIDIA_VISIBLE_DEVICES"] == ",".join(g.uuid for g in first.allocation.grants)
    different = refused(lambda: runtime.allocate(mig("u1", (A100, "2g.20gb", 2))))
    assert different.code is Code.FAILED_PRECONDITION
    assert "already holds a different allocation" in different.message


@pytest.mark.parametrize(
    ("ask", "code", "message"),
    [
        pytest.param(mig("u2", (A100, "1g.18gb", 0)), Code.INVALID_ARGUMENT, "no MIG profile", id="unknown-profile"),
        pytest.param(mig("u2", (A100, "3g.40gb", 2)), Code.INVALID_ARGUMENT, "valid starts: 0, 4", id="wrong-start"),
        pytest.param(mig("u2", (A100, "4g.40gb", 0)), Code.FAILED_PRECONDITION, "overlap 3g.40gb", id="overlapping"),
        pytest.param(mig("u2", (A100, "3g.40gb", 0)), Code.RESOURCE_EXHAUSTED, "held by pod uid u1", id="place-held"),
        pytest.param(mig("u2", (H200, "1g.18gb", 0)), Code.FAILED_PRECONDITION, "is not in MIG mode", id="gpu-not-mig"),
        pytest.param(mig("u2", ("GPU-nope", "1g.10gb", 0)), Code.NOT_FOUND, "no GPU 'GPU-nope'", id="unknown-gpu"),
        pytest.param(share("u2", A100, 100, 1024), Code.FAILED_PRECONDITION, "in MIG mode", id="time-share-on-mig"),
        pytest.param(
            AllocateInput(PodRef("default", "p", "u2"), "main", (Share("", 0, 0, A100),)),
            Code.INVALID_ARGUMENT, "needs its profile and start slice", id="no-profile",
        ),
        pytest.param(
            mig("u2", (A100, "1g.10gb", 4), (A100, "1g.10gb", 0)),
            Code.FAILED_PRECONDITION, "overlap", id="all-or-nothing",
        ),
    ],
)  # fmt: skip
def test_refusals(make_runtime: RuntimeFactory, ask: AllocateInput, code: Code, message: str) -> None:
    runtime = make_runtime(**MIXED)
    runtime.allocate(mig("u1", (A100, "3g.40gb", 0)))
    error = refused(lambda: runtime.allocate(ask))
    assert (error.code, message in error.message) == (code, True), error.message
    assert instances(runtime) == [("3g.40gb", 0)]  # nothing made, nothing left behind
    assert [a.pod.uid for a in runtime.allocations()] == ["u1"]


def test_a_mixed_node_shares_one_gpu_by_time_and_slices_the_other(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(**MIXED, isolation="mps")
    sliced = runtime.allocate(mig("u1", (A100, "7g.80gb", 0)))
    shared = runtime.allocate(share("u2", H200, 500, 8192))
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in sliced.edits.envs  # the hardware isolates a MIG device
    assert shared.edits.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    data = runtime.exporter_data()
    assert [(a.pod.uid, a.grants[0].gpu_uuid) for a in data.allocations] == [("u1", A100), ("u2", H200)]
    assert [g.sample.mig_mode for g in data.gpus] == [MigMode.DYNAMIC, MigMode.OFF]


def test_static_devices_are_found_by_place_and_never_destroyed(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(gpus="1xA100-80GB", mig_layouts={0: ["3g.40gb", "3g.40gb"]})
    lower, upper = backend(runtime).devices()[0].mig_devices
    by_place = runtime.allocate(mig("u1", (A100, "3g.40gb", 4)))
    assert by_place.allocation.grants[0].uuid == upper.uuid
    assert not by_place.allocation.grants[0].mig_dynamic
    by_uuid = runtime.allocate(mig("u2", (A100, "3g.40gb", 0), uuid=lower.uuid))
    assert by_uuid.allocation.grants[0].uuid == lower.uuid
    wrong = refused(lambda: runtime.allocate(mig("u3", (A100, "3g.40gb", 0), uuid=upper.uuid)))
    assert wrong.code is Code.INVALID_ARGUMENT
    assert "is a 3g.40gb at slice 4" in wrong.message
    missing = refused(lambda: runtime.allocate(mig("u3", (A100, "7g.80gb", 0))))
    assert missing.code is Code.FAILED_PRECONDITION
    assert "has no 7g.80gb MIG device at slice 0; it has 3g.40gb@0, 3g.40gb@4" in missing.message
    runtime.release("u1")
    runtime.release("u2")
    runtime.reconcile()
    assert instances(runtime) == [("3g.40gb", 0), ("3g.40gb", 4)]


def test_a_restart_keeps_the_devices_of_the_checkpoint_and_makes_none_twice(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(**MIXED)
    before = runtime.allocate(mig("u1", (A100, "2g.20gb", 2))).allocation.grants
    runtime.close()
    restarted = make_runtime(**MIXED)
    assert [a.grants for a in restarted.allocations()] == [before]
    assert instances(restarted) == [("2g.20gb", 2)]
    assert restarted.allocate(mig("u1", (A100, "2g.20gb", 2))).allocation.grants == before
    assert instances(restarted) == [("2g.20gb", 2)]
    restarted.release("u1")
    assert instances(restarted) == []


def test_a_restart_destroys_devices_no_allocation_holds(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(**MIXED)
    runtime.allocate(mig("u1", (A100, "3g.40gb", 0)))
    leaked = backend(runtime).create_mig_device(GpuUUID(A100), "3g.40gb", 4)  # made, then a crash before the checkpoint
    runtime.close()
    restarted = make_runtime(**MIXED)
    assert instances(restarted) == [("3g.40gb", 0)]
    assert leaked.uuid not in {m.uuid for m in backend(restarted).devices()[0].mig_devices}


def test_reconciliation_releases_gone_pods_and_destroys_their_devices(
    make_runtime: RuntimeFactory, clock: FakeClock
) -> None:
    alive = pod_manifest("pod-u2", "u2")
    runtime = make_runtime(**MIXED, pods=StaticPods([alive]), grace_s=5)
    runtime.allocate(mig("u1", (A100, "3g.40gb", 0)))
    runtime.allocate(mig("u2", (A100, "3g.40gb", 4)))
    clock.advance(10)
    released = runtime.reconcile()
    assert [a.pod.uid for a, _ in released] == ["u1"]
    assert instances(runtime) == [("3g.40gb", 4)]


def test_a_device_in_use_is_destroyed_by_a_later_reconciliation(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(**MIXED)
    uuid = runtime.allocate(mig("u1", (A100, "4g.40gb", 0))).allocation.grants[0].uuid
    backend(runtime).set_busy(uuid)
    runtime.release("u1")
    assert runtime.allocations() == []
    assert instances(runtime) == [("4g.40gb", 0)]  # still there: processes run on it
    blocked = refused(lambda: runtime.allocate(mig("u2", (A100, "2g.20gb", 2))))
    assert blocked.code is Code.FAILED_PRECONDITION
    backend(runtime).set_busy(uuid, False)
    runtime.reconcile()
    assert instances(runtime) == []
    runtime.allocate(mig("u2", (A100, "2g.20gb", 2)))


def test_a_failed_checkpoint_destroys_the_device_again(
    make_runtime: RuntimeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = make_runtime(**MIXED)

    def broken(*_: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(runtime._state, "save_allocations", broken)
    error = refused(lambda: runtime.allocate(mig("u1", (A100, "1g.10gb", 0))))
    assert error.code is Code.UNAVAILABLE
    assert instances(runtime) == []


def test_a_corrupt_checkpoint_is_rebuilt_around_the_devices_of_live_pods(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(**MIXED)
    uuid = runtime.allocate(mig("u1", (A100, "3g.40gb", 4))).allocation.grants[0].uuid
    runtime.close()
    (runtime.settings.state_dir / "checkpoint.json").write_text("{broken")
    dynamic = GpuShare(GpuUUID(""), 0, 0, 40192, "3g.40gb", GpuUUID(A100), 4)  # as the scheduler writes it
    assignment = Assignment(NodeName(NODE), {"main": (dynamic,)}).to_annotation()
    blind = make_runtime(**MIXED)  # no pod source: the allocations are unknown, so nothing is collected
    assert instances(blind) == [("3g.40gb", 4)]
    blind.close()
    restarted = make_runtime(**MIXED, pods=StaticPods([pod_manifest("pod-u1", "u1", assignment)]))
    (allocation,) = restarted.allocations()
    assert allocation.grants[0].uuid == uuid
    assert allocation.grants[0].mig_dynamic
    assert instances(restarted) == [("3g.40gb", 4)]


# -- over gRPC -----------------------------------------------------------------------------------
def test_mig_over_grpc(make_runtime: RuntimeFactory, serve_runtime: Any) -> None:
    _, client = serve_runtime(make_runtime(**MIXED, start=False))
    assert {"mig-shares", "mig-profiles"} <= client.version().features
    a100, h200 = client.list_devices()
    assert a100.mig_mode == pb.MIG_MODE_DYNAMIC
    assert [(p.name, p.size, list(p.starts), p.max_instances) for p in a100.mig_profiles][3] == (
        "3g.40gb",
        4,
        [0, 4],
        2,
    )
    assert h200.mig_profiles[0].name == "1g.18gb"  # a MIG-capable GPU shows its table in any mode
    answer = client.allocate("default", "p", "u1", "main", [Share("", 0, 0, A100, "1g.10gb", 0)])
    (granted,) = answer.allocation.shares
    assert (granted.parent_uuid, granted.mig_profile, granted.mig_start, granted.mig_dynamic) == (
        A100,
        "1g.10gb",
        0,
        True,
    )
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == granted.uuid
    (device,) = client.list_devices()[0].mig_devices
    assert (device.uuid, device.start, device.dynamic, device.health) == (granted.uuid, 0, True, pb.HEALTH_HEALTHY)
    with pytest.raises(RuntimeCallError) as bad:
        client.allocate("default", "q", "u2", "main", [Share("", 0, 0, A100, "1g.10gb", 7)])
    assert bad.value.code is grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(RuntimeCallError) as taken:
        client.allocate("default", "q", "u2", "main", [Share("", 0, 0, A100, "7g.80gb", 0)])
    assert taken.value.code is grpc.StatusCode.FAILED_PRECONDITION
    assert client.release("u1") == 1
    assert not client.list_devices()[0].mig_devices
