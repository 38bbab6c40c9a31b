"""`runtimekit demo`: what `make demo` runs, in two parts, in about a minute.

1. The embedded cluster (`runtimekit.cli.embedded`, as `runtimekit up` starts it): simulated H200
   nodes, each with the node runtime, the device plugin and a simulated kubelet, plus the scheduler.
   The example pods of `examples/pods/` are submitted (a fractional share, a whole GPU, four GPUs,
   a gang of three under a PodGroup, and a pod that cannot fit); the demo shows where each landed,
   how full each GPU is, and why the last one waits; then it stops the cluster.
2. Trace replay: the openb default pod list on 1213 GPU nodes with fgd, packfrag, bestfit and random.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from runtimekit.cli import simulate
from runtimekit.kube.objects import KubeObject, Pod, annotations_of, meta

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from runtimekit.cli.embedded import EmbeddedCluster
    from runtimekit.kube.http import KubeHttp
    from runtimekit.model import GpuShare
    from runtimekit.protocol import KitProtocol

EXAMPLE_PODS = Path(__file__).resolve().parents[3] / "examples" / "pods"
PLURALS = {"Pod": "pods", "PodGroup": "podgroups", "Job": "jobs", "Queue": "queues"}
MIB_PER_GIB = 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=4, help="simulated nodes (default 4)")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="H200 GPUs per node (default 8)")
    parser.add_argument("--pods", default=str(EXAMPLE_PODS), help="folder of pod manifests (default examples/pods)")
    parser.add_argument("--seeds", default="42", help="seeds for the trace replay (default 42)")
    parser.add_argument("--out", default="out/demo", help="folder for the JSON and the plot (default out/demo)")
    parser.add_argument("--skip-cluster", action="store_true", help="only the trace replay")
    parser.add_argument("--skip-replay", action="store_true", help="only the embedded cluster")
    parser.add_argument("--verbose", action="store_true", help="the components' INFO logs on stderr too")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    if not args.verbose:  # a dozen components log at INFO; the demo's tables say what matters
        logging.getLogger().setLevel(logging.WARNING)
    console = Console()
    if not args.skip_cluster:
        code = cluster_part(args, console)
        if code:
            return code
    if not args.skip_replay:
        return replay_part(args, console)
    return 0


# -- part 1: the embedded cluster ----------------------------------------------------------------
def load_manifests(folder: Path) -> list[KubeObject]:
    """Every object of every `*.yaml` in the folder, files in name order."""
    import yaml

    objects: list[KubeObject] = []
    for path in sorted(folder.glob("*.yaml")):
        docs = yaml.safe_load_all(path.read_text(encoding="utf-8"))
        objects += [cast(KubeObject, doc) for doc in docs if isinstance(doc, dict)]
    return objects


def submit(http: KubeHttp, objects: Iterable[KubeObject], namespace: str = "default") -> list[str]:
    """Create the objects; the names of the pods, in order."""
    from runtimekit.kube.http import object_path

    pods = []
    for obj in objects:
        kind = obj.get("kind", "")
        http.post(object_path(obj.get("apiVersion", ""), PLURALS[kind], namespace), dict(obj))
        if kind == "Pod":
            pods.append(meta(obj).get("name", ""))
    return pods


def _waiting_reason(pod: Pod) -> str | None:
    """The scheduler's reason when it has reported the pod unschedulable, else None."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "unschedulable")
    return None


def settle(http: KubeHttp, names: Sequence[str], timeout_s: float = 60.0) -> dict[str, Pod]:
    """Wait until every pod runs, ended, or is reported unschedulable; the pods by name."""
    deadline = time.monotonic() + timeout_s
    while True:
        listed = cast(list[Pod], http.list("/api/v1/namespaces/default/pods")[0])
        pods = {meta(p).get("name", ""): p for p in listed}
        phases = {n: (pods.get(n, {}).get("status") or {}).get("phase", "Pending") for n in names}
        if all(phases[n] != "Pending" or _waiting_reason(pods[n]) for n in names if n in pods):
            return {n: pods[n] for n in names if n in pods}
        if time.monotonic() >= deadline:
            return {n: pods[n] for n in names if n in pods}
        time.sleep(0.2)


def _shares(pod: Pod, protocol: KitProtocol) -> list[GpuShare]:
    from runtimekit.model import Assignment, AssignmentError

    text = annotations_of(pod).get(protocol.annotations.assignment)
    if not text or (pod.get("status") or {}).get("phase") != "Running":
        return []
    try:
        return list(Assignment.from_annotation(text).shares())
    except AssignmentError:
        return []


def _gpu_cell(shares: Sequence[GpuShare], gpu_mib: int) -> str:
    if shares and all(s.core_milli == 1000 and s.memory_mib >= gpu_mib for s in shares):
        indexes = sorted(s.index for s in shares)
        return f"{len(indexes)} whole: GPU {', '.join(map(str, indexes))}"
    return ", ".join(f"GPU {s.index}: {s.core_milli // 10}% {s.memory_mib // MIB_PER_GIB} GiB" for s in shares)


def pods_table(pods: Mapping[str, Pod], protocol: KitProtocol, gpu_mib: int) -> Table:
    from rich.table import Table

    table = Table(title="Where each pod landed")
    for column in ("pod", "node", "GPUs (compute, memory)", "phase"):
        table.add_column(column, no_wrap=column != "GPUs (compute, memory)")
    for name, pod in pods.items():
        phase = str((pod.get("status") or {}).get("phase", "Pending"))
        style = {"Running": "green", "Pending": "yellow"}.get(phase, "red")
        node = str((pod.get("spec") or {}).get("nodeName") or "-")
        table.add_row(name, node, _gpu_cell(_shares(pod, protocol), gpu_mib) or "-", f"[{style}]{phase}[/]")
    return table


def usage_table(cluster: EmbeddedCluster, pods: Iterable[Pod], gpu_mib: int) -> Table:
    """Per node and GPU, the allocated compute and memory."""
    from rich.table import Table

    used: dict[str, list[int]] = {}
    for pod in pods:
        for share in _shares(pod, cluster.protocol):
            core, mem = used.get(share.uuid, [0, 0])
            used[share.uuid] = [core + share.core_milli, mem + share.memory_mib]
    gpus = cluster.options.gpus_per_node
    table = Table(title="Allocated share of each GPU (compute, memory)", caption="· = free", show_lines=True)
    table.add_column("node", no_wrap=True)
    for index in range(gpus):
        table.add_column(f"GPU {index}", justify="center")
    for node in cluster.nodes:
        cells = []
        for gpu in cluster.expected_inventory(node.name).gpus:
            core, mem = used.get(gpu.uuid, [0, 0])
            if core == 0 and mem == 0:
                cells.append("[dim]·[/]")
                continue
            style = "red" if core >= 1000 or mem >= gpu_mib else "yellow"
            cells.append(f"[{style}]{core // 10}%\n{mem // MIB_PER_GIB}G[/]")
        table.add_row(node.name, *cells)
    return table


def cluster_part(args: argparse.Namespace, console: Console) -> int:
    from runtimekit.cli.embedded import ClusterOptions, start_cluster
    from runtimekit.model import gpu_model

    folder = Path(args.pods)
    if not folder.is_dir():
        console.print(f"[red]no pod manifests at {folder}[/] (use --pods DIR or --skip-cluster)")
        return 2
    console.rule(
        f"Embedded cluster: {args.nodes} nodes x {args.gpus_per_node} H200, runtime + device plugin + kubelet each"
    )
    started = time.monotonic()
    options = ClusterOptions(nodes=args.nodes, gpus_per_node=args.gpus_per_node, controller=False)
    with start_cluster(options) as cluster:
        console.print(f"API server {cluster.url}, ready in {time.monotonic() - started:.1f} s")
        http = cluster.http("runtimekit-demo")
        try:
            names = submit(http, load_manifests(folder))
            console.print(f"submitted {len(names)} pods from {folder}: {', '.join(names)}")
            pods = settle(http, names)
        finally:
            http.close()
        gpu_mib = gpu_model(options.gpu_model).memory_mib
        console.print(pods_table(pods, cluster.protocol, gpu_mib))
        console.print(usage_table(cluster, pods.values(), gpu_mib))
        for name, pod in pods.items():
            reason = _waiting_reason(pod)
            if reason and (pod.get("status") or {}).get("phase") == "Pending":
                console.print(f"[yellow]{name} waits:[/] {reason}")
    console.print(f"cluster stopped; part 1 took {time.monotonic() - started:.1f} s")
    return 0


# -- part 2: trace replay --------------------------------------------------------------------------
def replay_part(args: argparse.Namespace, console: Console) -> int:
    console.rule("Trace replay: openb default pod list on 1213 GPU nodes (6212 GPUs), tune 1.3")
    parser = argparse.ArgumentParser(prog="runtimekit simulate")
    simulate.add_arguments(parser)  # simulate's own flags and defaults: the demo cannot drift from them
    sim_args = parser.parse_args(
        [
            "--policy=fgd,packfrag,bestfit,random",
            f"--seeds={args.seeds}",
            "--tune=1.3",
            f"--json={args.out}/simulate.json",
            f"--plot={args.out}/allocation.png",
            "--jobs=2",
            "--quiet",
        ]
    )
    code = simulate.run(sim_args)
    if code == 0:
        console.print(f"results: {args.out}/simulate.json, plot: {args.out}/allocation.png")
    return code
