"""Issue 23 item 1: a runtime whose state was lost or damaged never forgets running containers silently.

Two pods run on the node, each holding GPU shares the runtime booked. Then the runtime's files are
damaged as an unlucky operator or a crash would (the checkpoint deleted after a clean stop, the
journal lost after `kill -9`, both, the journal's last line torn) and it starts again. It must find
the containers that hold devices without an allocation (by kubelet's PodResources or, without it,
the device plugin's `allocated` record), rebuild them from their pods' assignments, say so (log,
status, the exporter's counters, an Event on each pod) and keep their GPUs from being booked again;
whatever it cannot rebuild keeps it from reporting OK or ready."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from runtimekit.api.podresources_client import ListedContainer, ListedPod
from runtimekit.api.runtime_client import RuntimeClient, Share
from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.cli.main import main
from runtimekit.exporter.collector import RuntimeCollector
from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeName, simulated_uuid
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.allocations import PodRef
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.pods import StaticPods
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend, parse_gpu_spec
from runtimekit.runtime.values import AllocateInput, CheckpointStatus, RuntimeSettings

P = KitProtocol.default()
NODE = "node-a"
GPU0, GPU1 = simulated_uuid(NODE, 0), simulated_uuid(NODE, 1)
H200_MIB = 143771
# (pod, uid, GPU index, milli, MiB): what runs on the node before the damage
RUNNING = (("train-a", "uid-a", 0, 600, 40960), ("train-b", "uid-b", 1, 300, 20480))


class Events:
    """An EventSink that keeps what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def record_pod_event(self, namespace: str, name: str, uid: str, kind: str, reason: str, message: str) -> None:
        self.events.append((name, kind, reason, message))


class Kubelet:
    """kubelet's PodResources: the pods it runs and the device IDs each container holds."""

    def __init__(self, pods: Sequence[ListedPod] = (), down: bool = False) -> None:
        self.pods, self.down = list(pods), down

    def list(self) -> list[ListedPod]:
        if self.down:
            raise ConnectionError("kubelet's PodResources socket does not answer")
        return self.pods


def pod(name: str, uid: str, index: int, milli: int, mib: int, allocated: bool = True) -> dict[str, Any]:
    share = GpuShare(GpuUUID(simulated_uuid(NODE, index)), index, milli, mib)
    notes = {P.annotations.assignment: Assignment(NodeName(NODE), {"main": (share,)}).to_annotation()}
    if allocated:  # what the device plugin writes after Allocate
        notes[P.annotations.allocated] = json.dumps({"version": 1, "containers": {"main": [P.resources.core]}})
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid, "annotations": notes},
        "spec": {"nodeName": NODE, "containers": [{"name": "main"}]},
        "status": {"phase": "Running"},
    }


def listed(name: str, index: int, percent: int) -> ListedPod:
    ids = tuple(f"{simulated_uuid(NODE, index)}::{n}" for n in range(percent))
    return ListedPod("default", name, (ListedContainer("main", {P.resources.core: ids}),))


def ask(uid: str, index: int, milli: int, mib: int) -> AllocateInput:
    share = Share(simulated_uuid(NODE, index), milli, mib)
    return AllocateInput(PodRef("default", f"pod-{uid}", uid), "main", (share,), P.resources.core)


@pytest.fixture
def state_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="rk-lost-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


Factory = Callable[..., NodeRuntime]


@pytest.fixture
def make(state_dir: Path) -> Iterator[Factory]:
    made: list[NodeRuntime] = []

    def factory(pods: Any = None, kubelet: Any = None, events: Events | None = None, start: bool = True) -> NodeRuntime:
        backend = SimulatedBackend(NODE, parse_gpu_spec("2xH200"))
        settings = RuntimeSettings(NODE, state_dir, P, "0.1.0", reconcile_grace_s=30.0)
        runtime = NodeRuntime(settings, backend, make_isolation("none"), pods=pods, kubelet=kubelet, events=events)
        if start:
            runtime.start()
        made.append(runtime)
        return runtime

    yield factory
    for runtime in made:
        runtime.close()


def run_two_pods(make: Factory) -> NodeRuntime:
    """The runtime before the damage: both pods allocated (the second change goes to the journal)."""
    runtime = make()
    for _, uid, index, milli, mib in RUNNING:
        runtime.allocate(ask(uid, index, milli, mib))
    return runtime


def delete_checkpoint(runtime: NodeRuntime, folder: Path) -> None:
    runtime.close()  # a clean stop folds the journal into the checkpoint
    (folder / "checkpoint.json").unlink()


def lose_journal(runtime: NodeRuntime, folder: Path) -> None:  # kill -9: no close
    (folder / "checkpoint.journal").unlink()


def lose_both(runtime: NodeRuntime, folder: Path) -> None:
    (folder / "checkpoint.journal").unlink()
    (folder / "checkpoint.json").unlink()


def tear_last_line(runtime: NodeRuntime, folder: Path) -> None:
    journal = folder / "checkpoint.journal"
    journal.write_bytes(journal.read_bytes()[:-7])  # the second allocation's line, cut short


DAMAGE = [
    pytest.param(delete_checkpoint, {"uid-a", "uid-b"}, id="checkpoint.json deleted"),
    pytest.param(lose_journal, {"uid-b"}, id="journal lost after kill -9"),
    pytest.param(lose_both, {"uid-a", "uid-b"}, id="checkpoint and journal lost after kill -9"),
    pytest.param(tear_last_line, {"uid-b"}, id="last journal line torn"),
]
SOURCES = [
    pytest.param(True, id="kubelet's PodResources"),
    pytest.param(False, id="the plugin's allocated record"),
]


@pytest.mark.parametrize("with_kubelet", SOURCES)
@pytest.mark.parametrize(("damage", "lost"), DAMAGE)
def test_a_restarted_runtime_rebuilds_what_running_pods_hold_and_says_so(
    make: Factory,
    state_dir: Path,
    damage: Callable[[NodeRuntime, Path], None],
    lost: set[str],
    with_kubelet: bool,
) -> None:
    damage(run_two_pods(make), state_dir)
    pods = StaticPods([pod(name, uid, i, milli, mib) for name, uid, i, milli, mib in RUNNING])
    kubelet = Kubelet([listed(name, i, milli // 10) for name, _, i, milli, _ in RUNNING]) if with_kubelet else None
    events = Events()
    runtime = make(pods=pods, kubelet=kubelet, events=events)

    held = {
        a.pod.uid: (a.grants[0].uuid, a.grants[0].core_milli, a.grants[0].memory_mib) for a in runtime.allocations()
    }
    assert held == {uid: (simulated_uuid(NODE, i), milli, mib) for _, uid, i, milli, mib in RUNNING}
    status = runtime.status()
    assert status.checkpoint is CheckpointStatus.RECOVERED  # reported, never a plain OK
    assert status.state.rebuilt_total == len(lost)
    assert f"rebuilt {len(lost)} allocations" in status.checkpoint_message
    if damage is tear_last_line:
        assert status.state.torn_total == 1
        assert "torn" in status.checkpoint_message
    rebuilt = {name for name, kind, reason, _ in events.events if (kind, reason) == ("Warning", "GPUAllocationRebuilt")}
    assert rebuilt == {name for name, uid, *_ in RUNNING if uid in lost}
    with pytest.raises(ServiceError) as exc:  # the rebuilt shares are booked: a newcomer cannot take them
        runtime.allocate(ask("uid-new", 1, 800, 1024))
    assert exc.value.code is Code.RESOURCE_EXHAUSTED


def test_a_container_without_an_assignment_is_rebuilt_from_kubelets_device_ids(make: Factory, state_dir: Path) -> None:
    lose_both(run_two_pods(make), state_dir)
    bare = pod("train-a", "uid-a", 0, 600, 40960)
    del bare["metadata"]["annotations"][P.annotations.assignment]  # edited away since
    runtime = make(pods=StaticPods([bare]), kubelet=Kubelet([listed("train-a", 0, 60)]), events=Events())
    (allocation,) = runtime.allocations()
    grant = allocation.grants[0]
    assert (allocation.pod.uid, grant.uuid, grant.core_milli, grant.memory_mib) == (
        "uid-a",
        GPU0,
        600,
        60 * H200_MIB // 100,
    )
    assert runtime.status().checkpoint is CheckpointStatus.RECOVERED


def test_a_container_holding_gpus_that_cannot_be_rebuilt_keeps_the_runtime_from_ok(
    make: Factory, state_dir: Path
) -> None:
    lose_both(run_two_pods(make), state_dir)
    kubelet = Kubelet([listed("train-a", 0, 60)])
    runtime = make(pods=StaticPods([]), kubelet=kubelet)  # the API server no longer shows the pod kubelet runs
    status = runtime.status()
    assert status.checkpoint is CheckpointStatus.INCOMPLETE
    assert not status.checkpoint.trusted
    assert [u.split(":")[0] for u in status.state.unaccounted] == ["default/train-a container main"]
    with pytest.raises(ServiceError) as exc:  # its GPU is unknown to the runtime: nothing new is booked
        runtime.allocate(ask("uid-new", 1, 100, 1024))
    assert exc.value.code is Code.UNAVAILABLE
    assert "no allocation for: default/train-a container main" in exc.value.message
    kubelet.pods = []  # kubelet stopped it
    runtime.reconcile()
    assert runtime.status().checkpoint is CheckpointStatus.OK
    runtime.allocate(ask("uid-new", 1, 100, 1024))


def test_without_any_source_answering_the_runtime_is_unverified_and_not_ready(
    make: Factory, state_dir: Path, tmp_path: Path
) -> None:
    lose_both(run_two_pods(make), state_dir)

    class Down:
        def list_node_pods(self, node: str) -> list[Mapping[str, Any]]:
            raise ConnectionError("API server unreachable")

    runtime = make(pods=Down(), kubelet=Kubelet(down=True), start=False)
    socket = str(tmp_path / "rt.sock")
    daemon = RuntimeDaemon(runtime, socket, reconcile_interval_s=0).start()
    try:
        assert runtime.status().checkpoint is CheckpointStatus.UNVERIFIED
        assert main(["runtime-admin", "--socket", socket, "ready"]) == 1
        with RuntimeClient(socket) as client:
            families = {f.name: f for f in RuntimeCollector(client, P).collect()}
        states = {s.labels["state"]: s.value for s in families["runtimekit_runtime_checkpoint_state"].samples}
        assert states == {"unverified": 1.0}
    finally:
        daemon.stop()


def test_the_exporter_shows_what_was_rebuilt_and_the_probe_says_ready(
    make: Factory, state_dir: Path, tmp_path: Path
) -> None:
    tear_last_line(run_two_pods(make), state_dir)
    pods = StaticPods([pod(name, uid, i, milli, mib) for name, uid, i, milli, mib in RUNNING])
    runtime = make(pods=pods, start=False)
    socket = str(tmp_path / "rt.sock")
    daemon = RuntimeDaemon(runtime, socket, reconcile_interval_s=0).start()
    try:
        assert main(["runtime-admin", "--socket", socket, "ready"]) == 0  # recovered: trusted again
        with RuntimeClient(socket) as client:
            families = {f.name: f for f in RuntimeCollector(client, P).collect()}
    finally:
        daemon.stop()
    value = {f: families[f].samples[0].value for f in families if f.startswith("runtimekit_runtime_")}
    assert value["runtimekit_runtime_allocations_rebuilt"] == 1
    assert value["runtimekit_runtime_journal_torn_lines"] == 1
    assert value["runtimekit_runtime_unaccounted_containers"] == 0
    states = {s.labels["state"]: s.value for s in families["runtimekit_runtime_checkpoint_state"].samples}
    assert states == {"recovered": 1.0}


def test_a_torn_line_with_no_source_to_compare_is_reported_and_not_ok(make: Factory, state_dir: Path) -> None:
    tear_last_line(run_two_pods(make), state_dir)
    runtime = make()  # no API server, no PodResources: nothing to rebuild from
    status = runtime.status()
    assert status.checkpoint is CheckpointStatus.UNVERIFIED
    assert status.state.torn_total == 1
    assert "was torn" in status.checkpoint_message
