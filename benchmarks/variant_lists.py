"""Resampled stand-ins for the openb pod lists the FGD paper uses but `shared/traces/openb/` does not
ship (cpu100/200/250, gpushare60/80/100, multigpu30/40/50), to check a policy on lists it was not
tuned on.

Each list has the pod-class counts of the paper's list (docs/fgd-method.md §1.2: CPU-only, share and
whole-GPU pods), drawn with replacement from the shipped lists: CPU-only, share and whole-GPU pods
from `default`, the extra multi-GPU pods of multigpuXX from `multigpu20`'s multi-GPU pods. They are
stand-ins, not the paper's files: the classes match, the pods inside a class are resampled. The
gpuspec lists are left out (which pods the paper restricted to which models is not known). The node
list is copied alongside, so `better_than_fgd.py --traces OUT` runs on the folder.
Usage: .venv/bin/python benchmarks/variant_lists.py [--traces DIR] [--out out/variants] [--seed 7]
"""

from __future__ import annotations

import argparse
import csv
import random
import shutil
from pathlib import Path

from fgd_table import OPENB_DIR

FIELDS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec")
# name: (CPU-only pods, share pods, whole-GPU pods of default, extra multi-GPU pods)
VARIANTS = {
    "cpu100": (789, 3078, 3986, 0),
    "cpu200": (1768, 3078, 3986, 0),
    "cpu250": (2356, 3078, 3986, 0),
    "gpushare60": (1088, 5233, 1831, 0),
    "gpushare80": (1088, 6279, 785, 0),
    "gpushare100": (1088, 7064, 0, 0),
    "multigpu30": (1088, 3078, 3986, 356),
    "multigpu40": (1088, 3078, 3986, 594),
    "multigpu50": (1088, 3078, 3986, 909),
}


def read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return [{k: row.get(k) or "" for k in FIELDS} for row in csv.DictReader(f)]


def draw(rng: random.Random, pods: list[dict[str, str]], count: int) -> list[dict[str, str]]:
    return [rng.choice(pods) for _ in range(count)] if pods else []


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--traces", default=str(OPENB_DIR))
    parser.add_argument("--out", default="out/variants")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    traces, out = Path(args.traces), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(traces / "openb_node_list_gpu_node.csv", out)
    default = read(traces / "openb_pod_list_default.csv")
    cpu_only = [p for p in default if p["num_gpu"] == "0"]
    share = [p for p in default if p["num_gpu"] == "1" and int(p["gpu_milli"]) < 1000]
    whole = [p for p in default if p["num_gpu"] != "0" and int(p["gpu_milli"]) >= 1000]
    multi = [p for p in read(traces / "openb_pod_list_multigpu20.csv") if int(p["num_gpu"]) > 1]
    rng = random.Random(args.seed)
    for name, (n_cpu, n_share, n_whole, n_multi) in VARIANTS.items():
        pods = draw(rng, cpu_only, n_cpu) + draw(rng, share, n_share) + draw(rng, whole, n_whole)
        pods += draw(rng, multi, n_multi)
        rng.shuffle(pods)
        with (out / f"openb_pod_list_{name}.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, FIELDS)
            writer.writeheader()
            for i, pod in enumerate(pods):
                writer.writerow({**pod, "name": f"openb-pod-{i:04d}"})
        print(f"{out / f'openb_pod_list_{name}.csv'}: {len(pods)} pods")


if __name__ == "__main__":
    main()
