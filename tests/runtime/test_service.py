"""NodeRuntime as a plain service: allocation rules, idempotency, health, the switch, restarts, recovery."""

from __future__ import annotations

import pytest
from runtime_helpers import NODE, RuntimeFactory, pod_manifest

from runtimekit.api.runtime_client import Share
from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeName, simulated_uuid
from runtimekit.runtime.allocations import PodRef
from runtimekit.runtime.backend import EventKind, Fault
from runtimekit.runtime.mps import CommandResult, MpsDaemon, MpsState
from runtimekit.runtime.pods import StaticPods
from runtimekit.runtime.values import AllocateInput, CheckpointStatus

GPU0 = simulated_uuid(NODE, 0)
GPU1 = simulated_uuid(NODE, 1)
H200_MIB = 143771


def ask(uid: str, *shares: tuple[str, int, int], container: str = "main") -> AllocateInput:
    return AllocateInput(PodRef("default", f"pod-{uid}", uid), container, tuple(Share(u, c, m) for u, c, m in shares))


def code_of(exc: pytest.ExceptionInfo[ServiceError]) -> Code:
    return exc.value.code


@pytest.mark.parametrize(
    ("shares", "expected"),
    [
        pytest.param([(GPU0, 500, 8192)], [(GPU0, 0, 500, 8192)], id="share"),
        pytest.param([(GPU1, 1000, H200_MIB)], [(GPU1, 1, 1000, H200_MIB)], id="whole-gpu"),
        pytest.param(
            [(GPU1, 1000, H200_MIB), (GPU0, 1000, H200_MIB)],
            [(GPU0, 0, 1000, H200_MIB), (GPU1, 1, 1000, H200_MIB)],
            id="multi-gpu-sorted-by-index",
        ),
    ],
)
def test_allocate_books_grants_in_index_order(
    make_runtime: RuntimeFactory, shares: list[tuple[str, int, int]], expected: list[tuple[str, int, int, int]]
) -> None:
    runtime = make_runtime()
    result = runtime.allocate(ask("u1", *shares))
    assert [(g.uuid, g.index, g.core_milli, g.memory_mib) for g in result.allocation.grants] == expected
    assert result.edits.envs["NVIDIA_VISIBLE_DEVICES"] == ",".join(e[0] for e in expected)


@pytest.mark.parametrize(
    ("shares", "code"),
    [
        pytest.param([], Code.INVALID_ARGUMENT, id="no-shares"),
        pytest.param([(GPU0, -1, 10)], Code.INVALID_ARGUMENT, id="negative-core"),
        pytest.param([(GPU0, 100, -10)], Code.INVALID_ARGUMENT, id="negative-memory"),
        pytest.param([(GPU0, 1001, 10)], Code.INVALID_ARGUMENT, id="above-one-gpu"),
        pytest.param([(GPU0, 100, H200_MIB + 1)], Code.INVALID_ARGUMENT, id="more-memory-than-gpu"),
        pytest.param([("GPU-nope", 100, 10)], Code.NOT_FOUND, id="unknown-gpu"),
        pytest.param([(GPU0, 600, 10), (GPU0, 600, 10)], Code.INVALID_ARGUMENT, id="twice-the-same-gpu"),
        pytest.param([(GPU0, 100, 10), (GPU0, 100, 10)], Code.INVALID_ARGUMENT, id="twice-the-same-gpu-that-fits"),
        pytest.param([(GPU0, 0, 0)], Code.INVALID_ARGUMENT, id="nothing-but-visibility"),
    ],
)
def test_bad_requests_are_refused_with_a_code(
    make_runtime: RuntimeFactory, shares: list[tuple[str, int, int]], code: Code
) -> None:
    runtime = make_runtime()
    with pytest.raises(ServiceError) as exc:
        runtime.allocate(ask("u1", *shares))
    assert code_of(exc) is code
    assert runtime.allocations() == []


def test_missing_pod_identity_is_invalid(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime()
    with pytest.raises(ServiceError) as exc:
        runtime.allocate(AllocateInput(PodRef("default", "p", ""), "main", (Share(GPU0, 100, 10),)))
    assert code_of(exc) is Code.INVALID_ARGUMENT


def test_never_over_commits_and_says_what_is_free(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime()
    runtime.allocate(ask("u1", (GPU0, 700, 100_000)))
    for shares in ([(GPU0, 400, 10)], [(GPU0, 100, 50_000)], [(GPU1, 100, 10), (GPU0, 400, 10)]):
        with pytest.raises(ServiceError) as exc:
            runtime.allocate(ask("u2", *shares))
        assert code_of(exc) is Code.RESOURCE_EXHAUSTED
        assert f"GPU {GPU0} has 300 milli and {H200_MIB - 100_000} MiB free" in exc.value.message
    assert [a.pod.uid for a in runtime.allocations()] == ["u1"]  # all or nothing: GPU1 was not taken
    runtime.allocate(ask("u2", (GPU0, 300, H200_MIB - 100_000)))  # exactly what is left fits


def test_allocate_is_idempotent_and_a_different_repeat_is_refused(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime()
    first = runtime.allocate(ask("u1", (GPU0, 500, 8192)))
    again = runtime.allocate(ask("u1", (GPU0, 500, 8192)))
    assert again.allocation.grants == first.allocation.grants
    assert again.edits == first.edits
    assert len(runtime.allocations()) == 1
    with pytest.raises(ServiceError) as exc:
        runtime.allocate(ask("u1", (GPU0, 400, 8192)))
    assert code_of(exc) is Code.FAILED_PRECONDITION
    assert "already holds a different allocation" in exc.value.message


def test_release_frees_and_is_idempotent(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime()
    runtime.allocate(ask("u1", (GPU0, 1000, H200_MIB)))
    runtime.allocate(ask("u1", (GPU1, 200, 10), container="side"))
    assert [a.container for a in runtime.release("u1", "main")] == ["main"]
    assert runtime.release("u1", "main") == []
    runtime.allocate(ask("u2", (GPU0, 1000, H200_MIB)))  # the GPU is free again
    assert len(runtime.release("u1")) == 1  # every remaining container of the pod
    with pytest.raises(ServiceError):
        runtime.release("")


@pytest.mark.parametrize(
    ("fault", "healthy", "reason"),
    [
        pytest.param(Fault(EventKind.XID, 0, xid=79), False, "XID 79", id="critical-xid"),
        pytest.param(Fault(EventKind.XID, 0, xid=13), True, "", id="application-xid"),
        pytest.param(Fault(EventKind.ECC, 0, uncorrectable=True), False, "uncorrectable ECC error", id="ecc-dbe"),
        pytest.param(Fault(EventKind.ECC, 0), True, "", id="ecc-corrected"),
        pytest.param(Fault(EventKind.LOST, 0), False, "GPU lost", id="lost"),
    ],
)
def test_faults_set_health_per_policy(make_runtime: RuntimeFactory, fault: Fault, healthy: bool, reason: str) -> None:
    runtime = make_runtime()
    view = runtime.inject_fault(fault)
    assert (view.healthy, view.reason) == (healthy, reason)
    assert runtime.device_snapshot().by_uuid(GPU1).healthy  # type: ignore[union-attr]


def test_unhealthy_gpu_refuses_new_allocations_but_keeps_and_repeats_old(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime()
    runtime.allocate(ask("u1", (GPU0, 300, 10)))
    generation = runtime.device_snapshot().generation
    runtime.inject_fault(Fault(EventKind.XID, 0, xid=48))
    assert runtime.device_snapshot().generation == generation + 1
    with pytest.raises(ServiceError) as exc:
        runtime.allocate(ask("u2", (GPU0, 100, 10)))
    assert code_of(exc) is Code.FAILED_PRECONDITION
    assert "XID 48" in exc.value.message
    runtime.allocate(ask("u1", (GPU0, 300, 10)))  # kubelet's second resource for the same container
    runtime.inject_fault(Fault(EventKind.BACK, 0))
    runtime.allocate(ask("u2", (GPU0, 100, 10)))


def test_set_device_health_marks_and_clears(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime()
    view = runtime.set_device_health(GPU1, False, "temperature above 95 C", "exporter")
    assert (view.healthy, view.reason) == (False, "temperature above 95 C (by exporter)")
    assert runtime.set_device_health(GPU1, True, "", "").healthy
    with pytest.raises(ServiceError) as exc:
        runtime.set_device_health("GPU-unknown", False, "x", "")
    assert code_of(exc) is Code.NOT_FOUND


def test_fault_injection_needs_an_injector(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(injector=False)
    assert "fault-injection" not in runtime.version().features
    with pytest.raises(ServiceError) as exc:
        runtime.inject_fault(Fault(EventKind.LOST, 0))
    assert code_of(exc) is Code.FAILED_PRECONDITION
    with pytest.raises(ServiceError) as bad:
        make_runtime().inject_fault(Fault(EventKind.LOST, 7))
    assert code_of(bad) is Code.INVALID_ARGUMENT


def test_disable_refuses_new_keeps_running_and_persists(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime()
    runtime.allocate(ask("u1", (GPU0, 500, 10)))
    status = runtime.disable("maintenance window")
    assert (status.enabled, status.reason, status.allocation_count) == (False, "maintenance window", 1)
    with pytest.raises(ServiceError) as exc:
        runtime.allocate(ask("u2", (GPU1, 500, 10)))
    assert code_of(exc) is Code.FAILED_PRECONDITION
    assert "disabled (maintenance window)" in exc.value.message
    runtime.allocate(ask("u1", (GPU0, 500, 10)))  # a repeat of a running allocation is still answered

    restarted = make_runtime()
    assert not restarted.status().enabled
    assert len(restarted.allocations()) == 1
    restarted.enable("done")
    restarted.allocate(ask("u2", (GPU1, 500, 10)))
    assert make_runtime().status().enabled


def test_mps_daemon_follows_the_switch(make_runtime: RuntimeFactory, tmp_path: object) -> None:
    calls: list[tuple[list[str], str | None]] = []

    def runner(argv: list[str], stdin: str | None, env: object) -> CommandResult:
        calls.append((argv, stdin))
        return CommandResult(0, "")

    mps = MpsDaemon(
        str(tmp_path) + "/pipe", str(tmp_path) + "/log", runner, lambda _: "/usr/bin/nvidia-cuda-mps-control"
    )
    runtime = make_runtime(isolation="mps", mps=mps)
    assert runtime.status().mps_state is MpsState.RUNNING
    runtime.disable("off")
    assert runtime.status().mps_state is MpsState.STOPPED
    runtime.enable("on")
    assert calls == [
        (["/usr/bin/nvidia-cuda-mps-control", "-d"], None),
        (["/usr/bin/nvidia-cuda-mps-control"], "quit\n"),
        (["/usr/bin/nvidia-cuda-mps-control", "-d"], None),
    ]


def test_mps_daemon_without_the_binary_is_reported(make_runtime: RuntimeFactory, tmp_path: object) -> None:
    mps = MpsDaemon(str(tmp_path) + "/pipe", str(tmp_path) + "/log", which=lambda _: None)
    runtime = make_runtime(isolation="mps", mps=mps)
    assert runtime.status().mps_state is MpsState.BINARY_MISSING
    runtime.allocate(ask("u1", (GPU0, 500, 10)))  # isolation env is still returned


def test_restart_keeps_allocations(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime()
    runtime.allocate(ask("u1", (GPU0, 600, 1000)))
    runtime.allocate(ask("u2", (GPU1, 1000, H200_MIB)))
    restarted = make_runtime()
    assert [(a.pod.uid, a.grants) for a in restarted.allocations()] == [
        (a.pod.uid, a.grants) for a in runtime.allocations()
    ]
    assert restarted.status().checkpoint is CheckpointStatus.OK
    with pytest.raises(ServiceError) as exc:
        restarted.allocate(ask("u3", (GPU0, 500, 10)))
    assert code_of(exc) is Code.RESOURCE_EXHAUSTED


def _assignment(*shares: GpuShare, container: str = "main") -> str:
    return Assignment(NodeName(NODE), {container: shares}).to_annotation()


def test_corrupt_checkpoint_is_rebuilt_from_the_pods_of_the_node(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime()
    runtime.allocate(ask("u1", (GPU0, 600, 1000)))
    checkpoint = runtime.settings.state_dir / "checkpoint.json"
    checkpoint.write_bytes(checkpoint.read_bytes()[:40])
    pods = StaticPods(
        [
            pod_manifest("pod-u1", "u1", _assignment(GpuShare(GpuUUID(GPU0), 0, 600, 1000))),
            pod_manifest("done", "u9", _assignment(GpuShare(GpuUUID(GPU1), 1, 1000, H200_MIB)), phase="Succeeded"),
            pod_manifest("elsewhere", "u8", _assignment(GpuShare(GpuUUID(GPU1), 1, 100, 1)), node="node-b"),
            pod_manifest("plain", "u7"),
        ]
    )
    restarted = make_runtime(pods=pods)
    status = restarted.status()
    assert status.checkpoint is CheckpointStatus.RECOVERED
    assert "corrupt" in status.checkpoint_message
    assert "rebuilt 1 allocations" in status.checkpoint_message
    assert [(a.pod.uid, a.container, a.grants[0].core_milli) for a in restarted.allocations()] == [("u1", "main", 600)]
    assert list(checkpoint.parent.glob("checkpoint.json.corrupt-*"))
    with pytest.raises(ServiceError) as exc:
        restarted.allocate(ask("u2", (GPU0, 500, 10)))
    assert code_of(exc) is Code.RESOURCE_EXHAUSTED
    assert make_runtime().status().checkpoint is CheckpointStatus.OK  # the fresh checkpoint is good


def test_corrupt_checkpoint_without_pods_refuses_until_rebuilt(make_runtime: RuntimeFactory) -> None:
    make_runtime().allocate(ask("u1", (GPU0, 600, 1000)))
    checkpoint = make_runtime(start=False).settings.state_dir / "checkpoint.json"
    checkpoint.write_text('{"kind": "RuntimeCheckpoint", "version": 1, "checksum": "sha256:0", "data": {}}')

    class Down:
        def __init__(self) -> None:
            self.pods: list[dict[str, object]] | None = None

        def list_node_pods(self, node: str) -> list[dict[str, object]]:
            if self.pods is None:
                raise ConnectionError("API server unreachable")
            return self.pods

    source = Down()
    runtime = make_runtime(pods=source)
    assert runtime.status().checkpoint is CheckpointStatus.UNRECOVERED
    assert "checksum mismatch" in runtime.status().checkpoint_message
    with pytest.raises(ServiceError) as exc:
        runtime.allocate(ask("u2", (GPU1, 100, 10)))
    assert code_of(exc) is Code.UNAVAILABLE
    assert checkpoint.exists()  # still there: a restart would report it again, not start empty
    source.pods = [pod_manifest("pod-u1", "u1", _assignment(GpuShare(GpuUUID(GPU0), 0, 600, 1000)))]
    runtime.reconcile()
    assert runtime.status().checkpoint is CheckpointStatus.RECOVERED
    assert [a.pod.uid for a in runtime.allocations()] == ["u1"]
    runtime.allocate(ask("u2", (GPU1, 100, 10)))


def test_reconcile_releases_allocations_of_gone_pods_after_grace(make_runtime: RuntimeFactory, clock: object) -> None:
    pods = StaticPods([pod_manifest("pod-live", "live"), pod_manifest("pod-done", "done", phase="Failed")])
    runtime = make_runtime(pods=pods, grace_s=10)
    for uid in ("live", "gone", "done"):
        runtime.allocate(ask(uid, (GPU0, 100, 10)))
    # A finished pod is over at once; an absent one may only be newer than the list: it waits
    assert {a.pod.uid: why for a, why in runtime.reconcile()} == {"done": "pod is Failed"}
    clock.advance(11)  # type: ignore[attr-defined]
    released = {a.pod.uid: why for a, why in runtime.reconcile()}
    assert released == {"gone": "not on this node in the API server"}
    assert [a.pod.uid for a in runtime.allocations()] == ["live"]
    assert runtime.status().last_reconcile_message == "released 1"


def test_reconcile_without_any_source_releases_nothing(make_runtime: RuntimeFactory, clock: object) -> None:
    runtime = make_runtime()
    runtime.allocate(ask("u1", (GPU0, 100, 10)))
    clock.advance(3600)  # type: ignore[attr-defined]
    assert runtime.reconcile() == []


def test_exporter_data_has_samples_xids_and_allocations(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime()
    runtime.allocate(ask("u1", (GPU0, 800, 40_000)))
    runtime.inject_fault(Fault(EventKind.XID, 0, xid=13))
    runtime.inject_fault(Fault(EventKind.ECC, 1, count=3))
    data = runtime.exporter_data()
    gpu0, gpu1 = data.gpus
    assert gpu0.xid_count == 1
    assert [x.xid for x in gpu0.xids] == [13]
    assert gpu1.sample.ecc_corrected == 3
    assert 0 < gpu0.sample.memory_used_mib <= 40_000
    assert gpu1.sample.memory_used_mib == 0
    assert gpu0.sample.memory_total_mib == H200_MIB
    assert [(a.pod.uid, a.grants[0].core_milli) for a in data.allocations] == [("u1", 800)]


def test_mig_devices_are_booked_whole_and_exclusively(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(gpus="1xA100-80GB,1xH200", mig_layouts={0: ["3g.40gb", "3g.40gb"]})
    a100 = runtime.device_snapshot().devices[0].info
    mig_a, mig_b = (m.uuid for m in a100.mig_devices)
    result = runtime.allocate(ask("u1", (mig_a, 0, 0)))
    assert result.allocation.grants[0].parent_uuid == a100.uuid
    assert result.edits.envs["NVIDIA_VISIBLE_DEVICES"] == mig_a
    assert result.edits.cdi_devices == (f"nvidia.com/gpu={mig_a}",)
    with pytest.raises(ServiceError) as taken:
        runtime.allocate(ask("u2", (mig_a, 0, 0)))
    assert code_of(taken) is Code.RESOURCE_EXHAUSTED
    runtime.allocate(ask("u2", (mig_b, 0, 0)))
    with pytest.raises(ServiceError) as mig_mode:
        runtime.allocate(ask("u3", (a100.uuid, 100, 10)))
    assert code_of(mig_mode) is Code.FAILED_PRECONDITION
    runtime.release("u1")
    runtime.allocate(ask("u3", (mig_a, 0, 0)))


def test_an_allocate_that_would_over_commit_first_releases_what_has_ended(make_runtime: RuntimeFactory) -> None:
    """The scheduler may give a deleted pod's GPU to the next pod before this runtime's next reconcile:
    an Allocate that would over-commit reconciles once and is tried again; the refusal stands when
    nothing has ended."""
    manifests = [pod_manifest("pod-old", "old")]

    class Pods:
        def list_node_pods(self, node: str) -> list[dict[str, object]]:
            return list(manifests)

    runtime = make_runtime(pods=Pods(), grace_s=30)
    runtime.allocate(ask("old", (GPU0, 600, 10)))
    with pytest.raises(ServiceError) as refused:
        runtime.allocate(ask("new", (GPU0, 600, 10)))  # "old" still runs: over-commit
    assert code_of(refused) is Code.RESOURCE_EXHAUSTED
    manifests[0] = pod_manifest("pod-old", "old", phase="Succeeded")  # it ended a moment ago
    runtime.allocate(ask("new", (GPU0, 600, 10)))
    assert [a.pod.uid for a in runtime.allocations()] == ["new"]
