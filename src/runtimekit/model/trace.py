"""Cluster trace files in the Alibaba openb format (cluster-trace-gpu-v2023).

Node lists: `sn, cpu_milli, memory_mib, gpu, model[, mig]`; `mig`, where given, is the node's static MIG
layout: one layout per GPU in GPU order separated by `/` (one layout alone is every GPU's), each
the profiles of its instances joined by `+`, e.g. `1g.18gb+1g.18gb+2g.35gb+3g.71gb/7g.141gb` for
two GPUs; empty: no GPU in MIG mode (benchmarks/cluster_shapes.py's `h200-mig`). Pod lists: `name,
cpu_milli, memory_mib, num_gpu, gpu_milli[, gpu_spec, ...]`; other columns (qos, phase, times) are not used. A bad file
raises `TraceError` naming the file, line and column; nothing is returned for it. Numbers are whole,
not negative and within `COLUMN_MAX` (no node has more than 64 GPUs, a share is at most 1000 milli
of one GPU), node models are models the kit knows, names are unique, and no pod is deleted before
it is created (`deletion_time` before `creation_time`, where a row gives both).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runtimekit.base.textfiles import TextError, read_text
from runtimekit.model.gpu import gpu_model
from runtimekit.model.mig import geometry, layout_from_names


class TraceError(ValueError):
    """A trace file that cannot be used; the message names file, line and column."""


@dataclass(frozen=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str
    line: int = 0
    mig: tuple[tuple[str, ...], ...] = ()  # per GPU: the profiles of its static MIG instances; () no MIG


@dataclass(frozen=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU, 0..1000; meaningful only when num_gpu > 0
    gpu_spec: str = ""  # allowed GPU models, '|'-separated
    line: int = 0

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpu * self.gpu_milli if self.num_gpu else 0

    def allowed_models(self) -> frozenset[str] | None:
        return frozenset(m for m in self.gpu_spec.split("|") if m) if self.gpu_spec and self.num_gpu else None


NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
COLUMN_MAX = {
    "cpu_milli": 1 << 40,
    "memory_mib": 1 << 40,
    "gpu": 64,
    "num_gpu": 64,
    "gpu_milli": 1000,
}
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


def _rows(text: str, source: str, required: Sequence[str]) -> tuple[list[str], list[tuple[int, list[str]]]]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise TraceError(f"{source}: the file is empty") from None
    except csv.Error as exc:
        raise TraceError(f"{source}:1: not valid CSV: {exc}") from None
    header = [h.strip() for h in header]
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceError(f"{source}:1: missing column {missing[0]!r} (the header has {', '.join(header)})")
    rows: list[tuple[int, list[str]]] = []
    try:
        for row in reader:
            if not row or all(not cell.strip() for cell in row):
                continue
            rows.append((reader.line_num, row))
    except csv.Error as exc:
        raise TraceError(f"{source}:{reader.line_num}: not valid CSV: {exc}") from None
    if not rows:
        raise TraceError(f"{source}: no data rows after the header")
    return header, rows


def _int(source: str, line: int, column: str, value: str) -> int:
    text = value.strip()
    try:
        number = int(text)
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            raise TraceError(f"{source}:{line}: column {column!r} is not a number: {value!r}") from None
        if not as_float.is_integer():
            raise TraceError(f"{source}:{line}: column {column!r} must be a whole number: {value!r}") from None
        number = int(as_float)
    if number < 0:
        raise TraceError(f"{source}:{line}: column {column!r} must not be negative: {value!r}")
    if number > COLUMN_MAX.get(column, number):
        raise TraceError(f"{source}:{line}: column {column!r} must be at most {COLUMN_MAX[column]}: {value!r}")
    return number


def _cells(source: str, line: int, header: list[str], row: list[str]) -> dict[str, str]:
    if len(row) < len(header):
        raise TraceError(f"{source}:{line}: {len(row)} values for {len(header)} columns")
    return dict(zip(header, row, strict=False))


def parse_node_list(text: str, source: str = "<nodes>") -> list[TraceNode]:
    header, rows = _rows(text, source, NODE_COLUMNS)
    nodes = []
    seen: set[str] = set()
    for line, row in rows:
        cells = _cells(source, line, header, row)
        name = cells["sn"].strip()
        if not name:
            raise TraceError(f"{source}:{line}: column 'sn' is empty")
        if name in seen:
            raise TraceError(f"{source}:{line}: node {name!r} appears twice")
        seen.add(name)
        gpus = _int(source, line, "gpu", cells["gpu"])
        model = cells["model"].strip()
        if gpus and not model:
            raise TraceError(f"{source}:{line}: column 'model' is empty for a node with GPUs")
        if gpus:
            try:
                gpu_model(model)
            except KeyError as exc:
                raise TraceError(f"{source}:{line}: column 'model': {exc.args[0]}") from None
        nodes.append(
            TraceNode(
                name,
                _int(source, line, "cpu_milli", cells["cpu_milli"]),
                _int(source, line, "memory_mib", cells["memory_mib"]),
                gpus,
                model,
                line,
                _mig_layout(source, line, cells.get("mig", ""), model, gpus),
            )
        )
    return nodes


def _mig_layout(source: str, line: int, text: str, model: str, gpus: int) -> tuple[tuple[str, ...], ...]:
    """The `mig` column: per GPU the profiles of its static instances, each layout checked to fit."""
    text = text.strip()
    if not text:
        return ()
    geo = geometry(model)
    if geo is None or not gpus:
        raise TraceError(f"{source}:{line}: column 'mig': a node of {gpus} {model or 'no'} GPUs has no MIG mode")
    layouts = [tuple(p.strip() for p in part.split("+")) for part in text.split("/")]
    if len(layouts) == 1:
        layouts *= gpus
    if len(layouts) != gpus:
        raise TraceError(f"{source}:{line}: column 'mig': {len(layouts)} layouts for {gpus} GPUs")
    for layout in set(layouts):
        try:
            layout_from_names(geo, layout)
        except ValueError as exc:
            raise TraceError(f"{source}:{line}: column 'mig': {exc}") from None
    return tuple(layouts)


def parse_pod_list(text: str, source: str = "<pods>") -> list[TracePod]:
    header, rows = _rows(text, source, POD_COLUMNS)
    pods = []
    first: dict[str, int] = {}
    for line, row in rows:
        cells = _cells(source, line, header, row)
        name = cells["name"].strip()
        if not name:
            raise TraceError(f"{source}:{line}: column 'name' is empty")
        if name in first:
            raise TraceError(f"{source}:{line}: pod {name!r} appears twice (first on line {first[name]})")
        first[name] = line
        num_gpu = _int(source, line, "num_gpu", cells["num_gpu"])
        milli = _int(source, line, "gpu_milli", cells["gpu_milli"])
        spec = cells.get("gpu_spec", "").strip()
        _check_lifetime(source, line, name, cells)
        pods.append(
            TracePod(
                name,
                _int(source, line, "cpu_milli", cells["cpu_milli"]),
                _int(source, line, "memory_mib", cells["memory_mib"]),
                num_gpu,
                milli if num_gpu else 0,
                spec,
                line,
            )
        )
    return pods


def _check_lifetime(source: str, line: int, name: str, cells: dict[str, str]) -> None:
    """A pod's deletion may not come before its creation (the times are seconds in the trace)."""
    created, deleted = cells.get("creation_time", "").strip(), cells.get("deletion_time", "").strip()
    if not (created and deleted):
        return
    start = _int(source, line, "creation_time", created)
    end = _int(source, line, "deletion_time", deleted)
    if end < start:
        raise TraceError(
            f"{source}:{line}: pod {name!r} is deleted before it is created: "
            f"column 'deletion_time' {end} is before 'creation_time' {start}"
        )


def _read(path: str | Path) -> str:
    try:
        return read_text(path)
    except TextError as exc:
        raise TraceError(str(exc)) from None


def read_node_list(path: str | Path) -> list[TraceNode]:
    return parse_node_list(_read(path), str(path))


def read_pod_list(path: str | Path) -> list[TracePod]:
    return parse_pod_list(_read(path), str(path))


def spec_warnings(pods: Sequence[TracePod], nodes: Sequence[TraceNode], source: str = "<pods>") -> list[str]:
    """A warning per pod whose gpu_spec names no model any node has (such pods cannot be placed)."""
    models = {n.model for n in nodes if n.gpus}
    out = []
    for pod in pods:
        allowed = pod.allowed_models()
        if allowed is not None and not allowed & models:
            out.append(
                f"{source}:{pod.line}: pod {pod.name}: gpu_spec {pod.gpu_spec!r} names no GPU model of the nodes"
            )
    return out
