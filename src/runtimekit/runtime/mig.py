"""MIG on the node: the placement rules every backend enforces, the `--mig-mode`/`--mig-layout` flags,
and the capability device nodes of a MIG device.

Rules (`placement_problem`), the same for the simulated backend, the NVML backend's pre-check and the
runtime service: a MIG device is made only on a GPU in dynamic MIG mode, of a profile the GPU has
(`runtimekit.model.mig` for the built-in models, NVML's profile table on real GPUs), at one of the
profile's valid starts, on memory slices no existing instance occupies.

Flags (`parse_mig_config`):
- `--mig-mode MODE` for every GPU, or entries `INDEX:MODE` separated by commas with at most one bare
  `MODE` as the default for unlisted GPUs (`0:dynamic,1:static`, `dynamic,0:off`); MODE is
  `off`, `static` or `dynamic`. Without a default, unlisted GPUs are `off`.
- `--mig-layout PROFILES` (comma-separated, e.g. `3g.40gb,2g.20gb,1g.10gb,1g.10gb`) for every static
  GPU, or groups `INDEX:PROFILES` separated by `;` with at most one bare group as the default
  (`0:3g.40gb,3g.40gb;1:7g.80gb`). A GPU with its own layout is static unless `--mig-mode` names
  it; without `--mig-mode`, a bare layout makes every GPU static.
Pure functions; callers: the backends, the service, the daemon's option parsing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from runtimekit.model import MigMode
from runtimekit.model.mig import MigGeometry, MigProfile, mask
from runtimekit.runtime.backend import DeviceInfo, MigDeviceInfo, MigError, MigFailure

_INDEXED = re.compile(r"^\s*(\d+)\s*:(.*)$")
# /proc/driver/nvidia-caps/mig-minors: config 1, monitor 2, then per GPU minor (0-31) and GPU
# instance (0-14) the instance's access minor followed by its compute instances' (0-7).
_CAPS_FIRST, _CAPS_PER_GPU, _CAPS_PER_GI = 3, 15 * 9, 9


def slices(profile: MigProfile, start: int) -> str:
    return f"{start}" if profile.size == 1 else f"{start}-{start + profile.size - 1}"


def _occupied_by(geo: MigGeometry, device: MigDeviceInfo) -> int:
    profile = geo.profile(device.profile)
    if profile is None or device.start < 0:
        return 0  # unknown shape: the driver itself refuses an overlap
    return mask(device.start, profile.size)


def placement_problem(gpu: DeviceInfo, profile_name: str, start: int) -> MigError | None:
    """Why a `profile_name` instance cannot be made at `start` on `gpu` now, or None."""
    where = f"GPU {gpu.index} ({gpu.uuid})"
    if gpu.mig_mode is not MigMode.DYNAMIC:
        return MigError(
            MigFailure.CONFLICT,
            f"{where} is not in dynamic MIG mode (mode {gpu.mig_mode.value}): the runtime makes MIG devices "
            "only on dynamic GPUs",
        )
    geo = gpu.mig_geometry
    if geo is None:
        return MigError(MigFailure.CONFLICT, f"{where}: no MIG profiles known for model {gpu.model}")
    profile = geo.profile(profile_name)
    if profile is None:
        return MigError(
            MigFailure.INVALID, f"{gpu.model} has no MIG profile {profile_name!r}; it has {', '.join(geo.names)}"
        )
    if start not in profile.starts:
        valid = ", ".join(str(s) for s in profile.starts)
        return MigError(
            MigFailure.INVALID,
            f"MIG profile {profile_name} cannot start at slice {start} on {gpu.model}; valid starts: {valid}",
        )
    wanted = mask(start, profile.size)
    for other in gpu.mig_devices:
        if _occupied_by(geo, other) & wanted:
            other_profile = geo.profile(other.profile)
            assert other_profile is not None
            return MigError(
                MigFailure.CONFLICT,
                f"MIG slices {slices(profile, start)} of {where} overlap {other.profile} device {other.uuid} "
                f"at slices {slices(other_profile, other.start)}",
            )
    return None


def max_instances(geo: MigGeometry, profile: MigProfile) -> int:
    """How many instances of `profile` fit on the empty GPU at once."""
    taken, count = 0, 0
    for start in profile.starts:
        if not taken & mask(start, profile.size):
            taken |= mask(start, profile.size)
            count += 1
    return count


def cap_paths(gpu_minor: int, gpu_instance: int, compute_instance: int) -> tuple[str, ...]:
    """The capability device nodes a container needs for one MIG device (GI access, CI access)."""
    gi = _CAPS_FIRST + gpu_minor * _CAPS_PER_GPU + gpu_instance * _CAPS_PER_GI
    return (f"/dev/nvidia-caps/nvidia-cap{gi}", f"/dev/nvidia-caps/nvidia-cap{gi + 1 + compute_instance}")


# -- flags ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MigConfig:
    """`--mig-mode` and `--mig-layout` as parsed: per GPU index, with defaults for unlisted GPUs."""

    default_mode: MigMode | None = None
    modes: Mapping[int, MigMode] = field(default_factory=dict)
    default_layout: tuple[str, ...] = ()
    layouts: Mapping[int, tuple[str, ...]] = field(default_factory=dict)

    @property
    def given(self) -> bool:
        return bool(self.default_mode or self.modes or self.default_layout or self.layouts)

    def mode(self, index: int) -> MigMode | None:
        """The mode asked for GPU `index`; None when the flags say nothing about it."""
        if index in self.modes:
            return self.modes[index]
        if index in self.layouts:
            return MigMode.STATIC  # a layout for this very GPU says static unless its mode is named
        if self.default_mode is not None:
            return self.default_mode
        if self.modes:
            return MigMode.OFF
        return MigMode.STATIC if self.default_layout else None

    def layout(self, index: int) -> tuple[str, ...]:
        return self.layouts.get(index, self.default_layout)

    def expand(self, count: int) -> tuple[dict[int, MigMode], dict[int, tuple[str, ...]]]:
        """Modes and static layouts for GPUs 0..count-1. Raises ValueError for an index past the last GPU,
        a layout on a GPU that is not static, or a static GPU without a layout."""
        for flag, indexes in (("--mig-mode", self.modes), ("--mig-layout", self.layouts)):
            beyond = sorted(i for i in indexes if i >= count)
            if beyond:
                raise ValueError(f"{flag} names GPU {beyond[0]}, but the node has {count} GPUs")
        modes = {i: self.mode(i) or MigMode.OFF for i in range(count)}
        layouts: dict[int, tuple[str, ...]] = {}
        for index, mode in modes.items():
            if mode is MigMode.STATIC:
                if not self.layout(index):
                    raise ValueError(f"GPU {index} is in static MIG mode but --mig-layout gives it no layout")
                layouts[index] = self.layout(index)
            elif index in self.layouts:
                raise ValueError(f"--mig-layout gives GPU {index} a layout, but its MIG mode is {mode.value}")
        return modes, layouts


def _mode(text: str, flag: str) -> MigMode:
    try:
        return MigMode(text.strip())
    except ValueError:
        raise ValueError(f"{flag}: bad mode {text.strip()!r}; use off, static or dynamic") from None


def _split_indexed(text: str, separator: str, flag: str) -> tuple[str | None, dict[int, str]]:
    default: str | None = None
    indexed: dict[int, str] = {}
    for part in text.split(separator):
        if not part.strip():
            continue
        match = _INDEXED.match(part)
        if match is None:
            if default is not None:
                raise ValueError(f"{flag}: more than one entry without a GPU index ({default!r}, {part.strip()!r})")
            default = part.strip()
            continue
        index = int(match.group(1))
        if index in indexed:
            raise ValueError(f"{flag}: GPU {index} is named twice")
        indexed[index] = match.group(2).strip()
    return default, indexed


def _profiles(text: str, flag: str) -> tuple[str, ...]:
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    if not names:
        raise ValueError(f"{flag}: an empty layout")
    return names


def parse_mig_config(mode_text: str = "", layout_text: str = "") -> MigConfig:
    """The flags' values as a MigConfig. Raises ValueError naming the flag and the bad part."""
    default_mode, modes = _split_indexed(mode_text, ",", "--mig-mode")
    default_layout, layouts = _split_indexed(layout_text, ";", "--mig-layout")
    return MigConfig(
        _mode(default_mode, "--mig-mode") if default_mode is not None else None,
        {i: _mode(m, "--mig-mode") for i, m in modes.items()},
        _profiles(default_layout, "--mig-layout") if default_layout is not None else (),
        {i: _profiles(p, "--mig-layout") for i, p in layouts.items()},
    )
