"""How `runtimekit inspect` prints its view: rich tables, one per node with a row per GPU and a
totals line under it, and the cluster's totals last (the layout of gpushare's `kubectl inspect
gpushare -d`); `-o wide` adds the GPU UUIDs, MIG instances and a row per container share (`-o json`
is `inspect_json`). Called by `runtimekit.cli.inspect_cmd`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from runtimekit.cli.inspect_json import container_usage
from runtimekit.cli.inspect_usage import GpuUsage, NodeUsage
from runtimekit.cli.inspect_view import ClusterView, GpuView, NodeView
from runtimekit.model.request import MILLI_PER_GPU

GIB = 1024


def render(view: ClusterView, usage: Mapping[str, NodeUsage], out: TextIO, wide: bool = False) -> None:
    """The tables of `view` on `out` (a terminal's width; 200 columns when not a terminal)."""
    console = Console(file=out, width=None if out.isatty() else 200, highlight=False)
    if not view.nodes:
        console.print("no GPU nodes")
        return
    for node in view.nodes:
        _node(console, node, usage.get(node.name), wide)
    core = view.core_granted_milli / MILLI_PER_GPU
    console.print(
        f"Allocated/Total GPU compute in cluster: {core:g}/{view.gpus} GPUs ({_pct(core, view.gpus)}); "
        f"GPU memory: {_gib(view.memory_granted_mib)}/{_gib(view.memory_mib)} GiB "
        f"({_pct(view.memory_granted_mib, view.memory_mib)})"
    )
    if not view.signatures_checked:
        console.print("(assignment signatures not checked: give --assignment-keys to check them as the scheduler does)")


def _node(console: Console, node: NodeView, usage: NodeUsage | None, wide: bool) -> None:
    header = f"NODE {node.name}" + (f"  {node.address}" if node.address else "")
    header += "  Ready" if node.ready else "  NotReady"
    if usage is not None:
        header += f"  exporter {usage.url}" + (" (runtime down)" if usage.runtime_up is False else "")
    console.print(Text(header, style="bold"))
    if node.problem:
        console.print(f"  inventory unreadable: {node.problem}")
    measured = usage is not None and not usage.error
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in (
        "GPU",
        *(("UUID",) if wide else ()),
        "MODEL",
        "HEALTH",
        "CORE",
        "MEMORY (GiB)",
        "FREE CORE",
        "FREE MEM (GiB)",
        *(("USED", "MEM USED (GiB)") if measured else ()),
        "PODS",
    ):
        table.add_column(column)
    for gpu in node.gpus:
        used = usage.gpus.get(gpu.uuid) if measured and usage is not None else None
        table.add_row(*_gpu_row(gpu, used, wide, measured, usage))
        if wide:
            for row in _detail_rows(gpu, measured, usage):
                table.add_row(*row)
    console.print(table)
    if usage is not None and usage.error:
        console.print(f"  usage unknown: {usage.error}")
    for ignored in node.ignored:
        console.print(f"  ignored {ignored.namespace}/{ignored.pod} ({ignored.reason}): {ignored.message}")
    core = node.core_granted_milli / MILLI_PER_GPU
    console.print(
        f"  Allocated/Total: compute {core:g}/{len(node.gpus)} GPUs ({_pct(core, len(node.gpus))}), "
        f"memory {_gib(node.memory_granted_mib)}/{_gib(node.memory_mib)} GiB "
        f"({_pct(node.memory_granted_mib, node.memory_mib)})\n"
    )


def _gpu_row(gpu: GpuView, used: GpuUsage | None, wide: bool, measured: bool, usage: NodeUsage | None) -> list[str]:
    health = "ok" if gpu.healthy else "unhealthy"
    if used is not None and used.healthy is False:
        health = "unhealthy: " + (", ".join(used.reasons) or "exporter")
    core = f"MIG {gpu.mig_mode}" if gpu.mig_mode != "off" else _pct(gpu.core_granted_milli, MILLI_PER_GPU)
    over = {f"{s.namespace}/{s.pod}" for s in gpu.shares if (c := container_usage(gpu, s, usage)) and c.over_share}
    pods = sorted(
        {
            f"{s.namespace}/{s.pod}" + (" (over its share)" if f"{s.namespace}/{s.pod}" in over else "")
            for s in gpu.shares
        }
    )
    row = [
        str(gpu.index),
        *((gpu.uuid,) if wide else ()),
        gpu.model,
        health,
        core,
        f"{_gib(gpu.memory_granted_mib)}/{_gib(gpu.memory_mib)}",
        "-" if gpu.mig_mode != "off" else _pct(gpu.core_free_milli, MILLI_PER_GPU),
        _gib(gpu.memory_free_mib),
    ]
    if measured:
        row += _used(used)
    row.append(str(len(pods)) if wide else ", ".join(pods) or "-")
    return row


def _used(used: GpuUsage | None) -> list[str]:
    if used is None:
        return ["?", "?"]
    util = "?" if used.utilization is None else f"{100 * used.utilization:.0f}%"
    memory = "?" if used.memory_used_bytes is None else _gib(used.memory_used_bytes / (1024 * 1024))
    return [util, memory]


def _detail_rows(gpu: GpuView, measured: bool, usage: NodeUsage | None) -> list[list[str]]:
    """-o wide: a row per container share (with what the container uses, where the exporter
    attributes it) and per free MIG instance, under the GPU's row."""
    pad = ["", ""] if measured else []
    rows = []
    for share in gpu.shares:
        where = f"MIG {share.mig_profile} {share.mig_uuid}" if share.mig_profile else ""
        core = "" if share.mig_profile else _pct(share.core_milli, MILLI_PER_GPU)
        used = container_usage(gpu, share, usage)
        mine = _used(GpuUsage(used.utilization, used.memory_used_bytes)) if used is not None and measured else pad
        held = ", ".join(n for n in (share.container, share.claim and f"resourceclaim/{share.claim}") if n)
        name = f"{share.namespace}/{share.pod} ({held})"
        if used is not None and used.over_share:
            name += " over its share"
        rows.append(["", where, "", "", core, _gib(share.memory_mib), "", "", *mine, name])
    for mig in gpu.mig:
        if not mig.pod:
            rows.append(["", f"MIG {mig.profile} {mig.uuid}", "", "", "", "", "", "", *pad, "free"])
    return rows


def _gib(mib: float) -> str:
    return f"{mib / GIB:.1f}".removesuffix(".0")


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"
