"""Benchmark the node path kubelet takes: Allocate through the device plugin to the runtime, and how fast
a GPU health change reaches kubelet's ListAndWatch stream. Prints one JSON object.

Setup, as on a node: `runtimekit runtime` (simulated GPUs `--gpus`, isolation mps) runs as its own
process on a unix socket; the device plugin (its manager and real gRPC servers per resource) runs in
this process; this script plays kubelet and calls `/v1beta1.DevicePlugin/Allocate` on the plugin's
socket. The API server is either faked in memory or `runtimekit apiserver` in its own process.
- Allocate latency: for each of `--pods` pods (1 % of a GPU each, spread over the GPUs, with
  `--background` allocated pods already on the node), the time of one Allocate RPC: kubelet's
  PodResources asked which pod is being admitted (served here, listing that pod), match on the
  plugin's watch-kept view of the node's pods with the assignment's signature and requests checked,
  runtime Allocate (with its checkpoint journal line appended and fdatasync'd), guarded patch of the pod.
  Variants: `fake_api` (plugin + runtime),
  `fake_api_tmpfs_state` (the runtime's state dir on /dev/shm: the same without disk latency),
  `fake_api_list_per_call` (no view: the node's pods listed and decoded on every call, as before the
  view) and `embedded_api` (an API server over HTTP, watched by the plugin's `NodePods`).
  `checkpoint_fsync_ms` is one fsync in the state dir's file system;
  `checkpoint_write_ms` is one new allocation made durable as the runtime does it (journal line +
  fdatasync) against rewriting the whole checkpoint (what it did before the journal). Target: p99 <= 10 ms.
- Health propagation: inject an XID (then GPU back) through the runtime's admin API and time until the
  plugin's ListAndWatch stream, read as kubelet, shows the GPU's devices Unhealthy (Healthy).
  Target <= 1 s.

Usage: python benchmarks/bench_deviceplugin.py [--pods 500] [--background 30] [--gpus 8xH200] [--flips 20]
                                               [--state-root DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grpc
import httpx2

from runtimekit import __version__
from runtimekit.api import kubelet
from runtimekit.api.podresources_client import PodResourcesClient
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.api.v1beta1 import deviceplugin_pb2 as dp
from runtimekit.api.v1beta1 import deviceplugin_pb2_grpc as dp_grpc
from runtimekit.base.files import write_atomic
from runtimekit.base.keyring import KeyRing
from runtimekit.cluster.kubelet.devicemanager import PodIdentity
from runtimekit.cluster.kubelet.podresources import serve_pod_resources
from runtimekit.deviceplugin.kubeapi import NodeApi, PodView
from runtimekit.deviceplugin.manager import DevicePluginManager
from runtimekit.deviceplugin.matching import encode_allocated
from runtimekit.deviceplugin.resources import socket_name
from runtimekit.deviceplugin.service import DevicePluginService, DeviceState, PluginSettings
from runtimekit.kube.errors import ConflictError
from runtimekit.kube.nodeapi import KubeNodeApi
from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeName
from runtimekit.model.authority import sign_assignment
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.allocations import Allocation, Grant, PodRef
from runtimekit.runtime.state import StateDir, encode_checkpoint

PROTOCOL = KitProtocol.default()
NODE = "bench-node"
PODS_PATH = "/api/v1/namespaces/default/pods"
KEYS = KeyRing.from_secrets(b"the benchmark scheduler's assignment key")


def signed(pod: dict[str, Any]) -> dict[str, str]:
    """The scheduler's signature of a created pod's assignment (over the UID the server gave it)."""
    notes = pod["metadata"]["annotations"]
    text = notes[PROTOCOL.annotations.assignment]
    return {PROTOCOL.annotations.assignment_signature: sign_assignment(KEYS, pod["metadata"]["uid"], text)}


class MemoryApi:
    """The API server faked in memory, with resourceVersion preconditions (the plugin's NodeApi)."""

    def __init__(self) -> None:
        self.pods_by_name: dict[str, dict[str, Any]] = {}
        self._rv = 0
        self._lock = threading.Lock()

    def add(self, pod: dict[str, Any]) -> None:
        with self._lock:
            self._rv += 1
            pod["metadata"]["resourceVersion"] = str(self._rv)
            pod["metadata"]["uid"] = f"uid-{self._rv}"
            pod["metadata"]["annotations"].update(signed(pod))
            self.pods_by_name[pod["metadata"]["name"]] = pod

    def remove(self, name: str) -> None:
        with self._lock:
            self.pods_by_name.pop(name, None)

    def pods(self) -> list[dict[str, Any]]:
        """The plugin's watch-kept view of the node's pods (as `NodePods` holds them: shared, not copied)."""
        with self._lock:
            return list(self.pods_by_name.values())

    def remember(self, pod: Mapping[str, Any]) -> None:
        return None  # the fake's own objects are the view: a patch is seen at once

    def list_node_pods(self, node: str) -> list[dict[str, Any]]:
        with self._lock:
            return [json.loads(json.dumps(p)) for p in self.pods_by_name.values() if p["spec"]["nodeName"] == node]

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        with self._lock:
            return json.loads(json.dumps(self.pods_by_name[name]))

    def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Mapping[str, str | None], resource_version: str | None
    ) -> dict[str, Any]:
        with self._lock:
            pod = self.pods_by_name[name]
            if resource_version and resource_version != pod["metadata"]["resourceVersion"]:
                raise ConflictError(name)
            pod = json.loads(json.dumps(pod))  # a new object, as a watch delivers it
            pod["metadata"]["annotations"].update({k: v for k, v in annotations.items() if v is not None})
            self._rv += 1
            pod["metadata"]["resourceVersion"] = str(self._rv)
            self.pods_by_name[name] = pod
            return pod

    def patch_node_metadata(
        self, node: str, labels: Mapping[str, str | None], annotations: Mapping[str, str | None]
    ) -> None:
        return None


# kubelet's side, in its own process as on a node (so its client threads do not share the plugin's
# interpreter): reads device IDs from stdin, calls Allocate, prints the RPC's latency in ms.
KUBELET = """
import sys, time, grpc
from runtimekit.api import kubelet
from runtimekit.api.v1beta1 import deviceplugin_pb2 as dp, deviceplugin_pb2_grpc as dp_grpc
stub = dp_grpc.DevicePluginStub(grpc.insecure_channel(kubelet.unix_target(sys.argv[1])))
for line in sys.stdin:
    request = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=[line.strip()])])
    started = time.perf_counter()
    try:
        stub.Allocate(request, timeout=10)
    except grpc.RpcError as exc:
        print(f"error {exc.code()}: {exc.details()}", flush=True)
        continue
    print((time.perf_counter() - started) * 1000, flush=True)
"""


def pod_manifest(name: str, gpu: str, index: int, allocated: bool) -> dict[str, Any]:
    core = PROTOCOL.resources.core
    assignment = Assignment(NodeName(NODE), {"main": (GpuShare(GpuUUID(gpu), index, 10, 0),)})
    annotations = {
        PROTOCOL.annotations.assignment: assignment.to_annotation(),
        PROTOCOL.annotations.assume_time: str(time.time_ns()),
    }
    if allocated:
        annotations[PROTOCOL.annotations.allocated] = encode_allocated({"main": [core]})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "nodeName": NODE,
            "containers": [
                {
                    "name": "main",
                    "image": "cuda:12",
                    "resources": {"limits": {core: "1", PROTOCOL.resources.memory: "0"}},
                }
            ],
        },
    }


def summary(values_ms: list[float]) -> dict[str, float]:
    ordered = sorted(values_ms)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 3)

    return {
        "n": len(ordered),
        "p50": pct(0.50),
        "p99": pct(0.99),
        "max": round(ordered[-1], 3),
        "mean": round(statistics.fmean(ordered), 3),
    }


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "runtimekit.cli.main", "--log-level", "WARNING", *args]


class Holdings:
    """What PodResources needs of kubelet's device manager here: no devices held (the benchmark's kubelet
    records none); the pod being admitted comes from `Rig.admitting`."""

    def pods(self) -> list[Any]:
        return []

    def resources(self) -> list[str]:
        return []


class Rig:
    """The runtime process + the device plugin around one NodeApi; `allocate` plays kubelet on the core
    resource's socket, with PodResources listing the pod it admits."""

    def __init__(self, root: Path, gpus: str, api: NodeApi, state_dir: Path, view: PodView | None = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        socket = root / "rt.sock"
        self.runtime = subprocess.Popen(
            command(
                "runtime", "--backend", "simulated", "--simulate-gpus", gpus, "--isolation", "mps",
                "--socket", str(socket), "--state-dir", str(state_dir), "--node-name", NODE,
                "--pod-resources-socket", "", "--reconcile-interval", "0",
            ),
            env={**os.environ, "KUBERNETES_SERVICE_HOST": ""},
        )  # fmt: skip
        self.client = RuntimeClient(str(socket))
        if not self.client.wait_ready(60):
            raise RuntimeError("the runtime did not start")
        self.gpus = [d.uuid for d in self.client.list_devices()]
        self.admitting: PodIdentity | None = None
        self.pod_resources = serve_pod_resources(Holdings(), root / "pr.sock", self._running)  # type: ignore[arg-type]
        self.lister = PodResourcesClient(str(root / "pr.sock"))
        settings = PluginSettings(NODE, PROTOCOL, keys=KEYS)
        self.service = DevicePluginService(settings, self.client, api, DeviceState(), view, self.lister)
        self.manager = DevicePluginManager(self.service, self.client.watch_devices, root / "plugins").start(10)
        socket = root / "plugins" / socket_name(PROTOCOL.resources.core)
        self.channel = grpc.insecure_channel(kubelet.unix_target(str(socket)))
        self.stub = dp_grpc.DevicePluginStub(self.channel)

        self.kubelet = subprocess.Popen(
            [sys.executable, "-c", KUBELET, str(socket)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def _running(self) -> list[tuple[PodIdentity, list[str]]]:
        return [(self.admitting, ["main"])] if self.admitting is not None else []

    def allocate(self, gpu: str, replica: int, pod: dict[str, Any]) -> float:
        """One Allocate from the kubelet process for `pod`; its latency in ms."""
        meta = pod["metadata"]
        self.admitting = PodIdentity(meta["namespace"], meta["name"], meta.get("uid", ""))
        assert self.kubelet.stdin is not None
        assert self.kubelet.stdout is not None
        self.kubelet.stdin.write(f"{gpu}::{replica}\n")
        self.kubelet.stdin.flush()
        answer = self.kubelet.stdout.readline().strip()
        try:
            return float(answer)
        except ValueError:
            raise RuntimeError(f"Allocate failed: {answer}") from None

    def close(self) -> None:
        if self.kubelet.stdin is not None:
            self.kubelet.stdin.close()
        self.kubelet.wait(timeout=30)
        self.channel.close()
        self.manager.stop()
        self.lister.close()
        self.pod_resources.stop(0).wait()
        self.client.close()
        self.runtime.send_signal(signal.SIGTERM)
        self.runtime.wait(timeout=30)


def allocate_latency(
    root: Path, state: Path, args: argparse.Namespace, api: NodeApi, add: Callable[[dict[str, Any]], None],
    remove: Callable[[str], None], view: PodView | None,
) -> dict[str, float]:  # fmt: skip
    gpus, pods, background = args.gpus, args.pods, args.background
    rig = Rig(root, gpus, api, state, view)
    try:
        for i in range(background):
            add(pod_manifest(f"running-{i}", rig.gpus[i % len(rig.gpus)], i % len(rig.gpus), allocated=True))
        for i in range(20):  # warm up connections and code paths
            gpu = rig.gpus[i % len(rig.gpus)]
            warm = pod_manifest(f"warm-{i}", gpu, i % len(rig.gpus), allocated=False)
            add(warm)
            rig.allocate(gpu, i, warm)
            remove(f"warm-{i}")
        samples = []
        for i in range(pods):  # pods come and go: the node holds about `background` allocations throughout
            index = i % len(rig.gpus)
            pod = pod_manifest(f"pod-{i}", rig.gpus[index], index, allocated=False)
            add(pod)
            samples.append(rig.allocate(rig.gpus[index], i % 100, pod))
            uid = next(a.pod.uid for a in rig.client.list_allocations() if a.pod.name == f"pod-{i}")
            remove(f"pod-{i}")
            rig.client.release(uid)
        return summary(samples)
    finally:
        rig.close()


def health_propagation(root: Path, state: Path, gpus: str, flips: int) -> dict[str, float]:
    rig = Rig(root, gpus, MemoryApi(), state)
    seen: queue.Queue[tuple[float, dict[str, str]]] = queue.Queue()
    call = rig.stub.ListAndWatch(dp.Empty())

    def read() -> None:
        try:
            for reply in call:
                seen.put((time.perf_counter(), {d.ID: d.health for d in reply.devices}))
        except grpc.RpcError:
            return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        seen.get(timeout=10)
        target = f"{rig.gpus[0]}::0"
        samples = []
        for i in range(flips):
            kind, expected = (
                (pb.FAULT_KIND_XID, kubelet.UNHEALTHY) if i % 2 == 0 else (pb.FAULT_KIND_GPU_BACK, kubelet.HEALTHY)
            )
            started = time.perf_counter()
            rig.client.inject_fault(kind, 0, xid=79)
            while True:
                at, devices = seen.get(timeout=5)
                if devices.get(target) == expected:
                    samples.append((at - started) * 1000)
                    break
        return summary(samples)
    finally:
        call.cancel()
        rig.close()


def fsync_ms(folder: Path, count: int = 30) -> dict[str, float]:
    """One fsync of a small file in `folder`'s file system."""
    folder.mkdir(parents=True, exist_ok=True)
    samples = []
    fd = os.open(folder / "fsync-probe", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for _ in range(count):
            os.write(fd, b"x" * 512)
            started = time.perf_counter()
            os.fsync(fd)
            samples.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
    return summary(samples)


def checkpoint_write_ms(folder: Path, background: int, count: int = 300) -> dict[str, dict[str, float]]:
    """One new allocation made durable, with `background` allocations held: as the runtime does it
    (a journal line, one fdatasync) and by rewriting the whole checkpoint (temp file, fsync, rename,
    fsync of the folder), interleaved so both see the same disk."""
    held = [
        Allocation(PodRef("default", f"running-{i}", f"u{i}"), "main", (Grant(f"GPU-{i % 8}", i % 8, 10, 0),), i)
        for i in range(background)
    ]
    state = StateDir(folder / "journal")
    state.save_allocations(NODE, held)
    rewritten = folder / "rewrite" / "checkpoint.json"
    journal, rewrite = [], []
    for i in range(count):
        now = [*held, Allocation(PodRef("default", f"pod-{i}", f"p{i}"), "main", (Grant("GPU-0", 0, 10, 0),), i)]
        started = time.perf_counter()
        state.save_allocations(NODE, now)
        journal.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        write_atomic(rewritten, encode_checkpoint(NODE, now))
        rewrite.append((time.perf_counter() - started) * 1000)
        state.save_allocations(NODE, held)  # the pod leaves again
        write_atomic(rewritten, encode_checkpoint(NODE, held))
    state.close()
    return {"journal": summary(journal), "whole_rewrite": summary(rewrite)}


def start_apiserver() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(command("apiserver", "--port", "0"), stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--background", type=int, default=30, help="allocated pods already on the node")
    parser.add_argument("--gpus", default="8xH200")
    parser.add_argument("--flips", type=int, default=20, help="health changes to time")
    parser.add_argument("--state-root", type=Path, help="where the runtime's state dirs go (default: a temp dir)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bdp-"))
    disk = Path(tempfile.mkdtemp(prefix="bdp-state-", dir=args.state_root))
    shm = Path(tempfile.mkdtemp(prefix="bdp-state-", dir="/dev/shm")) if Path("/dev/shm").is_dir() else None
    try:
        fsync = fsync_ms(disk / "probe")
        checkpoint = checkpoint_write_ms(disk / "checkpoint", args.background)
        fake = MemoryApi()
        fake_ms = allocate_latency(root / "fake", disk / "fake", args, fake, fake.add, fake.remove, fake)
        tmpfs_ms = None
        if shm is not None:
            fake = MemoryApi()
            tmpfs_ms = allocate_latency(root / "shm", shm / "fake", args, fake, fake.add, fake.remove, fake)
        fake = MemoryApi()
        listing_ms = allocate_latency(root / "list", disk / "list", args, fake, fake.add, fake.remove, None)
        server, url = start_apiserver()
        try:
            with httpx2.Client(base_url=url) as http:
                http.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
                real = KubeNodeApi.connect(url)

                def add(pod: dict[str, Any]) -> None:
                    created = http.post(PODS_PATH, json=pod)
                    created.raise_for_status()
                    pod["metadata"]["uid"] = created.json()["metadata"]["uid"]  # then signed, as a bind would
                    body = {"metadata": {"annotations": signed(created.json())}}
                    path = f"{PODS_PATH}/{pod['metadata']['name']}"
                    headers = {"Content-Type": "application/merge-patch+json"}
                    http.patch(path, json=body, headers=headers).raise_for_status()

                def remove(name: str) -> None:
                    http.delete(f"{PODS_PATH}/{name}", params={"gracePeriodSeconds": "0"}).raise_for_status()

                view = real.node_pods(NODE).start()
                view.wait_synced(30)
                embedded_ms = allocate_latency(root / "real", disk / "real", args, real, add, remove, view)
                view.stop()
                real.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
        health_ms = health_propagation(root / "health", disk / "health", args.gpus, args.flips)
    finally:
        for folder in (root, disk, shm):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
    result = {
        "benchmark": "deviceplugin",
        "version": __version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "checkpoint_fsync_ms": fsync,
        "checkpoint_write_ms": checkpoint,
        "allocate_ms": {
            "fake_api": fake_ms,
            "fake_api_tmpfs_state": tmpfs_ms,
            "fake_api_list_per_call": listing_ms,
            "embedded_api": embedded_ms,
        },
        "health_propagation_ms": health_ms,
        "targets": {"allocate_p99_ms": 10.0, "health_propagation_ms": 1000.0},
        "meets_targets": {
            "allocate_fake_api": fake_ms["p99"] <= 10.0,
            "allocate_fake_api_tmpfs_state": tmpfs_ms is not None and tmpfs_ms["p99"] <= 10.0,
            "allocate_embedded_api": embedded_ms["p99"] <= 10.0,
            "health_propagation": health_ms["max"] <= 1000.0,
        },
    }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
