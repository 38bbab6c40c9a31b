"""MIG profiles and their valid placements per GPU model, and the slice arithmetic on one GPU.

A GPU in MIG mode has a row of memory slices (8 on A100/H100/H200, 4 on A30). A GPU instance of a
profile occupies `size` consecutive slices starting at one of the profile's valid `starts`
(`nvidia-smi mig -lgipp`); two instances never overlap. The tables below are NVIDIA's for the
built-in models (MIG user guide, "Supported MIG profiles"); on real GPUs the runtime reads the same
facts from NVML. Memory sizes are what NVML reports for the instance, in MiB.
Pure values and functions; callers: the ledger, the scheduler's mig plugin, the runtime's
simulated backend, the simulator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MigProfile:
    name: str  # e.g. 1g.18gb
    compute_slices: int  # the "g" count, out of the GPU's compute slices (7 or 4)
    memory_mib: int
    size: int  # memory slices it occupies
    starts: tuple[int, ...]  # valid first slices

    def placements(self) -> tuple[tuple[int, int], ...]:
        return tuple((s, self.size) for s in self.starts)


@dataclass(frozen=True)
class MigGeometry:
    model: str
    slices: int  # memory slices of the GPU
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile | None:
        return next((p for p in self.profiles if p.name == name), None)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)


def _seven(model: str, sizes: Sequence[tuple[str, int]]) -> MigGeometry:
    """The 7-compute-slice, 8-memory-slice layout shared by A100, H100 and H200 (names differ by memory)."""
    (one, one_mem), (one_double, od_mem), (two, two_mem), (three, three_mem), (four, four_mem), (seven, seven_mem) = (
        sizes
    )
    return MigGeometry(
        model,
        8,
        (
            MigProfile(one, 1, one_mem, 1, (0, 1, 2, 3, 4, 5, 6)),
            MigProfile(one_double, 1, od_mem, 2, (0, 2, 4, 6)),
            MigProfile(two, 2, two_mem, 2, (0, 2, 4)),
            MigProfile(three, 3, three_mem, 4, (0, 4)),
            MigProfile(four, 4, four_mem, 4, (0,)),
            MigProfile(seven, 7, seven_mem, 8, (0,)),
        ),
    )


_BY_CHIP: Mapping[str, MigGeometry] = {
    g.model: g
    for g in (
        _seven(
            "A100-40GB",
            [
                ("1g.5gb", 4864),
                ("1g.10gb", 9856),
                ("2g.10gb", 9856),
                ("3g.20gb", 19968),
                ("4g.20gb", 19968),
                ("7g.40gb", 40192),
            ],
        ),
        _seven(
            "A100-80GB",
            [
                ("1g.10gb", 9728),
                ("1g.20gb", 19968),
                ("2g.20gb", 19968),
                ("3g.40gb", 40192),
                ("4g.40gb", 40192),
                ("7g.80gb", 80896),
            ],
        ),
        _seven(
            "H100-80GB",
            [
                ("1g.10gb", 9984),
                ("1g.20gb", 20096),
                ("2g.20gb", 20096),
                ("3g.40gb", 40320),
                ("4g.40gb", 40320),
                ("7g.80gb", 80896),
            ],
        ),
        _seven(
            "H200",
            [
                ("1g.18gb", 16384),
                ("1g.35gb", 32768),
                ("2g.35gb", 32768),
                ("3g.71gb", 65536),
                ("4g.71gb", 65536),
                ("7g.141gb", 143360),
            ],
        ),
        MigGeometry(
            "A30",
            4,
            (
                MigProfile("1g.6gb", 1, 5836, 1, (0, 1, 2, 3)),
                MigProfile("2g.12gb", 2, 11904, 2, (0, 2)),
                MigProfile("4g.24gb", 4, 24064, 4, (0,)),
            ),
        ),
    )
}


# Boards whose chip and memory are an SXM board's have its MIG layout (NVIDIA's MIG user guide lists
# the same profiles for them): the PCIe and NVL boards the runtime names by their own product names.
SAME_LAYOUT: Mapping[str, str] = {
    "H200-NVL": "H200",
    "H100-PCIe": "H100-80GB",
    "A100-80GB-PCIe": "A100-80GB",
    "A100-PCIE-40GB": "A100-40GB",
}
MIG_GEOMETRY: Mapping[str, MigGeometry] = {
    **_BY_CHIP,
    **{board: MigGeometry(board, _BY_CHIP[sxm].slices, _BY_CHIP[sxm].profiles) for board, sxm in SAME_LAYOUT.items()},
}


def geometry(model: str) -> MigGeometry | None:
    return MIG_GEOMETRY.get(model)


def mask(start: int, size: int) -> int:
    return ((1 << size) - 1) << start


def free_starts(geo: MigGeometry, profile: MigProfile, occupied: int) -> list[int]:
    """Valid starts of `profile` that do not overlap the occupied slice mask."""
    return [s for s in profile.starts if not occupied & mask(s, profile.size)]


def placeable(geo: MigGeometry, occupied: int) -> dict[str, int]:
    """How many instances of each profile could still be made, alone, on a GPU with this mask
    (greedy over valid starts, which is exact for these layouts)."""
    out = {}
    for profile in geo.profiles:
        taken, count = occupied, 0
        for start in profile.starts:
            if not taken & mask(start, profile.size):
                taken |= mask(start, profile.size)
                count += 1
        out[profile.name] = count
    return out


def layout_from_names(geo: MigGeometry, names: Iterable[str]) -> list[tuple[str, int]]:
    """Place a static layout (e.g. 3g.40gb,2g.20gb,1g.10gb,1g.10gb) on one GPU: a valid start for
    every instance, found by search (largest first, lowest starts preferred). Raises ValueError
    naming the profile that does not exist, or saying the layout does not fit."""
    wanted = list(names)
    profiles = []
    for name in wanted:
        profile = geo.profile(name)
        if profile is None:
            raise ValueError(f"{geo.model} has no MIG profile {name!r}; it has {', '.join(geo.names)}")
        profiles.append(profile)
    if sum(p.compute_slices for p in profiles) > (7 if geo.slices == 8 else 4):
        raise ValueError(f"MIG layout {','.join(wanted)} needs more compute slices than one {geo.model} has")
    ordered = sorted(profiles, key=lambda p: (-p.size, -p.compute_slices))

    def place(i: int, occupied: int) -> list[tuple[str, int]] | None:
        if i == len(ordered):
            return []
        for start in free_starts(geo, ordered[i], occupied):
            rest = place(i + 1, occupied | mask(start, ordered[i].size))
            if rest is not None:
                return [(ordered[i].name, start), *rest]
        return None

    placed = place(0, 0)
    if placed is None:
        raise ValueError(f"MIG layout {','.join(wanted)} does not fit one {geo.model}")
    return sorted(placed, key=lambda x: x[1])
