"""Node lists shaped like users' GPU clusters, with the openb pod lists scaled to them, and the shifted-mix
arrivals (two openb lists one after the other), for `better_than_fgd.py` and `offline_bound.py`
(docs/results/cluster-shapes.md).

Shapes (3,200 GPUs each, about half openb's 6,212, so a replay takes about a third of an openb one):
- `h200`: 400 nodes of 8 x H200 (a DGX H200: 224 vCPU, 2 TiB), the embedded cluster's default node.
- `h200-l40s`: two models side by side: 200 nodes of 8 x H200 as above, 100 of 8 x L40S (192 vCPU,
  1 TiB) and 200 of 4 x L40S (96 vCPU, 512 GiB).
- `h200-mig`: the `h200` nodes with a third of them in MIG mode: 267 nodes of 8 x H200 as above and
  133 (`h200mig-*`) whose GPUs are in static MIG mode with `MIG_LAYOUT`: GPUs 0-3 each cut as NVIDIA's
  `all-balanced` (2 x 1g.18gb, 1 x 2g.35gb, 1 x 3g.71gb), GPUs 4-7 each one 7g.141gb. A share pod
  asks for the smallest of those profiles that holds its share (runtimekit.sim.mig_nodes, the rule
  and its fallback to a share); whole-GPU pods never take MIG.
Each shape's folder (`OUT/<shape>/`) has the node list and every openb pod list of `--traces` (the
shipped ones and, with `--variants`, `variant_lists.py`'s stand-ins) as `openb_pod_list_<shape>-<list>.csv`,
with the pods' memory scaled to the GPU: times the shape's memory per GPU over openb's (81,106 MiB),
so memory binds about as often per GPU as on openb. A share stays a fraction of whichever GPU it lands
on (GPU compute and memory alike); CPU requests are kept (these nodes have 28 vCPU per GPU against
openb's 17.2, as users' GPU servers do). gpu_spec names openb's anonymised models, which these
clusters do not have, so the gpuspec lists are left out. Deterministic: no randomness at all.

Shifted mix: a list named `A+B` (e.g. `gpushare100+multigpu50`) is replayed as A's arrivals tuned to
half the target load followed by B's tuned to the other half, each shuffled by the seed
(`runtimekit.sim.arrivals.shifted_arrivals`), so the mix changes at column 65; fgd is given both
lists' workload up front.
Usage: .venv/bin/python benchmarks/cluster_shapes.py [--traces DIR[,DIR]] [--out out/shapes]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from fgd_table import OPENB_DIR

from runtimekit.model.trace import TraceNode, TracePod, read_node_list, read_pod_list

FIELDS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec")
OPENB_MIB_PER_GPU = 503_828_480 / 6212  # the openb GPU node list's memory over its GPUs
GIB = 1024
# name: (node-name prefix, count, GPUs, model, cpu_milli, memory_mib) per node group
SHAPES: dict[str, tuple[tuple[str, int, int, str, int, int], ...]] = {
    "h200": (("h200", 400, 8, "H200", 224_000, 2048 * GIB),),
    "h200-l40s": (
        ("h200", 200, 8, "H200", 224_000, 2048 * GIB),
        ("l40s8", 100, 8, "L40S", 192_000, 1024 * GIB),
        ("l40s4", 200, 4, "L40S", 96_000, 512 * GIB),
    ),
    "h200-mig": (
        ("h200", 267, 8, "H200", 224_000, 2048 * GIB),
        ("h200mig", 133, 8, "H200", 224_000, 2048 * GIB),
    ),
}
# node-name prefix: the static MIG layout of its nodes' GPUs (model/trace.py's `mig` column)
MIG_LAYOUT = {"h200mig": "/".join(["1g.18gb+1g.18gb+2g.35gb+3g.71gb"] * 4 + ["7g.141gb"] * 4)}
LISTS = (
    "default",
    "cpu050",
    "gpushare40",
    "multigpu20",
    "cpu100",
    "cpu200",
    "cpu250",
    "gpushare60",
    "gpushare80",
    "gpushare100",
    "multigpu30",
    "multigpu40",
    "multigpu50",
)


def shape_nodes(shape: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for prefix, count, gpus, model, cpu, memory in SHAPES[shape]:
        mig = {"mig": MIG_LAYOUT[prefix]} if prefix in MIG_LAYOUT else {}
        rows += [
            {"sn": f"{prefix}-{i:04d}", "cpu_milli": cpu, "memory_mib": memory, "gpu": gpus, "model": model, **mig}
            for i in range(count)
        ]
    return rows


def memory_scale(shape: str) -> float:
    groups = SHAPES[shape]
    return sum(c * m for _, c, _, _, _, m in groups) / sum(c * g for _, c, g, _, _, _ in groups) / OPENB_MIB_PER_GPU


def find(traces: str, name: str) -> Path:
    for folder in traces.split(","):
        if (Path(folder) / f"openb_pod_list_{name}.csv").exists():
            return Path(folder)
    raise SystemExit(f"error: no folder of {traces} has openb_pod_list_{name}.csv")


def write_shape(shape: str, traces: str, out: Path, lists: list[str]) -> None:
    folder = out / shape
    folder.mkdir(parents=True, exist_ok=True)
    nodes = shape_nodes(shape)
    with (folder / "openb_node_list_gpu_node.csv").open("w", newline="") as f:
        mig = ("mig",) if any("mig" in n for n in nodes) else ()  # the other shapes' files stay as they were
        writer = csv.DictWriter(f, ("sn", "cpu_milli", "memory_mib", "gpu", "model", *mig), restval="")
        writer.writeheader()
        writer.writerows(nodes)
    scale = memory_scale(shape)
    for name in lists:
        with (find(traces, name) / f"openb_pod_list_{name}.csv").open(newline="") as f:
            pods = list(csv.DictReader(f))
        with (folder / f"openb_pod_list_{shape}-{name}.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, FIELDS, extrasaction="ignore")
            writer.writeheader()
            for pod in pods:
                writer.writerow({**pod, "memory_mib": round(int(pod["memory_mib"]) * scale), "gpu_spec": ""})
    print(f"{folder}: {len(lists)} pod lists, memory x{scale:.3f}")


def list_inputs(traces: str, name: str) -> tuple[list[TraceNode], list[TracePod], list[TracePod]]:
    """Nodes, the first and the second list's pods of a list name (`A` or `A+B`; the second is
    empty for a plain list). The node list is the first list's folder's."""
    first, _, second = name.partition("+")
    folder = find(traces, first)
    nodes = read_node_list(folder / "openb_node_list_gpu_node.csv")
    pods_b = read_pod_list(find(traces, second) / f"openb_pod_list_{second}.csv") if second else []
    return nodes, read_pod_list(folder / f"openb_pod_list_{first}.csv"), pods_b


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--traces", default=f"{OPENB_DIR},out/variants")
    parser.add_argument("--out", default="out/shapes")
    parser.add_argument("--lists", default=",".join(LISTS))
    args = parser.parse_args()
    for shape in SHAPES:
        write_shape(shape, args.traces, Path(args.out), args.lists.split(","))


if __name__ == "__main__":
    main()
