"""The runtime's own per-GPU ledger of container allocations: it never over-commits a GPU.

`AllocationBook` books shares of GPUs in a `runtimekit.model.Ledger` (one node, one column per GPU,
all or nothing per container) and MIG devices exclusively by UUID; a GPU in MIG mode is never shared
by time. Booking the same shares again for the same (pod uid, container) returns the existing
allocation (Allocate is idempotent); different shares are refused until the old ones are released.
A MIG share is known by its GPU, profile and start slice: on a static GPU it resolves to the existing
MIG device; on a dynamic GPU it stays a placeholder (empty UUID, `mig_dynamic`) until the service has
made the device (`runtimekit.runtime.migdevices`). `restore` books allocations read back from a
checkpoint or rebuilt from pods, reporting (not hiding) any that no longer fit. Not thread-safe: the
runtime service serialises calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from runtimekit.api.runtime_client import Share
from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.model import Gpu, Ledger, LedgerError, MigMode, NodeCapacity, NodeInventory, NodeName, Placement, PodKey
from runtimekit.model.ledger import Slot
from runtimekit.runtime.backend import DeviceInfo, MigDeviceInfo

_UNLIMITED = NodeCapacity(cpu_milli=1 << 40, memory_bytes=1 << 60, pods=1 << 30)


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.uid})"


@dataclass(frozen=True)
class Grant:
    """A share of one GPU (or one MIG device, with its parent GPU) held by a container."""

    uuid: str
    index: int
    core_milli: int
    memory_mib: int
    parent_uuid: str = ""
    mig_profile: str = ""
    mig_start: int = -1
    mig_dynamic: bool = False  # the runtime made this MIG device for the container and destroys it at release

    @property
    def gpu_uuid(self) -> str:
        """The physical GPU this grant is on."""
        return self.parent_uuid or self.uuid

    @property
    def is_mig(self) -> bool:
        return bool(self.parent_uuid)

    @property
    def key(self) -> tuple[str, str, int, int, int]:
        """What a request for this grant names: a MIG slot (GPU, profile, start) or a GPU share."""
        if self.mig_profile:
            return (self.gpu_uuid, self.mig_profile, self.mig_start, 0, 0)
        return (self.uuid, "", -1, self.core_milli, self.memory_mib)


@dataclass(frozen=True)
class Allocation:
    pod: PodRef
    container: str
    grants: tuple[Grant, ...]
    created_unix_ms: int
    device_ids: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return self.pod.uid, self.container

    def same_grants(self, other: Allocation) -> bool:
        return _amounts(self.grants) == _amounts(other.grants)


def _amounts(grants: Iterable[Grant]) -> list[tuple[str, str, int, int, int]]:
    return sorted(g.key for g in grants)


def _pod_key(key: tuple[str, str]) -> PodKey:
    return PodKey(f"{key[0]}/{key[1]}")


class AllocationBook:
    """See the module docstring."""

    def __init__(self, node: str, devices: Sequence[DeviceInfo]) -> None:
        self._node = NodeName(node)
        self._devices: dict[str, DeviceInfo] = {}
        self._migs: dict[str, tuple[DeviceInfo, MigDeviceInfo]] = {}
        self.update_devices(devices)
        self._positions: dict[str, int] = {d.uuid: i for i, d in enumerate(devices)}
        self._ledger = Ledger()
        inventory = NodeInventory(
            self._node, tuple(Gpu(d.index, d.uuid, d.model, d.memory_mib, True, d.mig_mode) for d in devices)
        )
        self._ledger.table.set_node(inventory, _UNLIMITED)
        self._allocations: dict[tuple[str, str], Allocation] = {}
        self._mig_holders: dict[str, tuple[str, str]] = {}

    def update_devices(self, devices: Sequence[DeviceInfo]) -> None:
        """Take the GPUs' current MIG devices (after one was made or destroyed); the GPUs stay the same."""
        self._devices = {d.uuid: d for d in devices}
        self._migs = {m.uuid: (d, m) for d in devices for m in d.mig_devices}

    def mig_holder(self, mig_uuid: str) -> tuple[str, str] | None:
        """The (pod uid, container) holding a MIG device, or None."""
        return self._mig_holders.get(mig_uuid)

    def held_migs(self) -> set[str]:
        return set(self._mig_holders)

    def all(self) -> list[Allocation]:
        return sorted(self._allocations.values(), key=lambda a: (a.created_unix_ms, a.key))

    def get(self, uid: str, container: str) -> Allocation | None:
        return self._allocations.get((uid, container))

    def __len__(self) -> int:
        return len(self._allocations)

    def grants_for(self, requested: Sequence[Share]) -> tuple[Grant, ...]:
        """Validate requested shares against the devices; raises ServiceError (INVALID_ARGUMENT/NOT_FOUND).

        Refused besides unknown devices and impossible amounts: a share of neither compute nor memory
        (it would only make the GPU visible: a way onto a GPU another pod holds whole), and a GPU or
        MIG slot named twice for one container."""
        if not requested:
            raise ServiceError(Code.INVALID_ARGUMENT, "an allocation needs at least one GPU share")
        grants = [self._mig_grant(r) if r.is_mig or r.uuid in self._migs else self._grant(r) for r in requested]
        seen: set[tuple[str, str, int, str]] = set()
        for grant in grants:
            key = (grant.gpu_uuid, grant.mig_profile, grant.mig_start, grant.uuid if grant.is_mig else "")
            if key in seen:
                what = f"MIG slot {grant.mig_profile}@{grant.mig_start} of GPU" if grant.mig_profile else "GPU"
                raise ServiceError(Code.INVALID_ARGUMENT, f"{what} {grant.gpu_uuid} is named twice for one container")
            seen.add(key)
        return order_grants(grants)

    def _grant(self, share: Share) -> Grant:
        if share.core_milli < 0 or share.memory_mib < 0:
            raise ServiceError(
                Code.INVALID_ARGUMENT,
                f"GPU {share.uuid}: amounts must not be negative (core {share.core_milli} milli, "
                f"memory {share.memory_mib} MiB)",
            )
        if share.core_milli > 1000:
            raise ServiceError(Code.INVALID_ARGUMENT, f"GPU {share.uuid}: {share.core_milli} milli is above one GPU")
        if share.core_milli == 0 and share.memory_mib == 0:
            raise ServiceError(
                Code.INVALID_ARGUMENT,
                f"GPU {share.uuid}: a share of 0 milli and 0 MiB grants nothing but the sight of the GPU; refused",
            )
        device = self._devices.get(share.uuid)
        if device is not None:
            if share.memory_mib > device.memory_mib:
                raise ServiceError(
                    Code.INVALID_ARGUMENT,
                    f"GPU {share.uuid}: asks {share.memory_mib} MiB of a {device.memory_mib} MiB GPU",
                )
            return Grant(share.uuid, device.index, share.core_milli, share.memory_mib)
        raise ServiceError(Code.NOT_FOUND, f"this node has no GPU or MIG device {share.uuid!r}")

    def _mig_grant(self, share: Share) -> Grant:
        parent = self._devices.get(share.parent_uuid) if share.parent_uuid else None
        if parent is None and share.uuid in self._migs:
            parent = self._migs[share.uuid][0]
        if parent is None:
            missing = share.parent_uuid or share.uuid or "(none named)"
            raise ServiceError(Code.NOT_FOUND, f"this node has no GPU {missing!r} for a MIG share")
        if parent.mig_mode is MigMode.OFF:
            raise ServiceError(
                Code.FAILED_PRECONDITION,
                f"GPU {parent.index} ({parent.uuid}) is not in MIG mode: it has no {share.mig_profile or 'MIG'} slices",
            )
        if parent.mig_mode is MigMode.STATIC or (share.uuid in self._migs and not share.mig_profile):
            return _existing_grant(parent, share)
        if not share.mig_profile:
            raise ServiceError(
                Code.INVALID_ARGUMENT,
                f"a MIG share on GPU {parent.index} (dynamic MIG mode) needs its profile and start slice",
            )
        problem = mig_shape_problem(parent, share.mig_profile, share.mig_start)
        if problem:
            raise ServiceError(Code.INVALID_ARGUMENT, problem)
        assert parent.mig_geometry is not None
        profile = parent.mig_geometry.profile(share.mig_profile)
        assert profile is not None
        return Grant("", parent.index, 0, profile.memory_mib, parent.uuid, profile.name, share.mig_start, True)

    def book(self, allocation: Allocation) -> tuple[Allocation, bool]:
        """Book an allocation; returns (the allocation held, whether anything changed).

        Raises ServiceError: FAILED_PRECONDITION when the container holds different shares or a GPU is
        in MIG mode, RESOURCE_EXHAUSTED when a GPU or MIG device does not have room.
        """
        held = self._allocations.get(allocation.key)
        if held is not None:
            if not held.same_grants(allocation):
                raise ServiceError(
                    Code.FAILED_PRECONDITION,
                    f"container {allocation.container!r} of pod {allocation.pod} already holds a different "
                    "allocation; release it first",
                )
            merged = _merge_info(held, allocation)
            self._allocations[allocation.key] = merged
            return merged, merged != held
        self._take(allocation, allow_unusable=False)
        self._allocations[allocation.key] = allocation
        return allocation, True

    def _take(self, allocation: Allocation, allow_unusable: bool) -> None:
        migs = [g for g in allocation.grants if g.is_mig]
        for grant in migs:
            if not grant.uuid:
                raise ServiceError(Code.FAILED_PRECONDITION, f"{grant.mig_profile} MIG device not made yet")
            holder = self._mig_holders.get(grant.uuid)
            if holder is not None and holder != allocation.key:
                raise ServiceError(Code.RESOURCE_EXHAUSTED, f"MIG device {grant.uuid} is held by another container")
        gpus = [g for g in allocation.grants if not g.is_mig]
        if not allow_unusable:
            for grant in gpus:
                if self._devices[grant.uuid].mig_mode is not MigMode.OFF:
                    raise ServiceError(
                        Code.FAILED_PRECONDITION,
                        f"GPU {grant.uuid} is in MIG mode; ask for one of its MIG devices instead",
                    )
        slots = tuple(Slot(self._positions[g.uuid], g.core_milli, g.memory_mib) for g in gpus)
        if slots:
            try:
                self._ledger.reserve(_pod_key(allocation.key), Placement(self._node, slots=slots), allow_unusable)
            except LedgerError as exc:
                raise ServiceError(Code.RESOURCE_EXHAUSTED, f"would over-commit: {exc}; {self._free(gpus)}") from None
        for grant in migs:
            self._mig_holders[grant.uuid] = allocation.key

    def _free(self, grants: Iterable[Grant]) -> str:
        free = self._ledger.table.free_gpus(self._node)
        parts = []
        for uuid in dict.fromkeys(g.uuid for g in grants):
            core, mem = free[self._positions[uuid]]
            parts.append(f"GPU {uuid} has {core} milli and {mem} MiB free")
        return ", ".join(parts)

    def release(self, uid: str, container: str = "") -> list[Allocation]:
        """Release one container's allocation, or every one of the pod when `container` is empty."""
        keys = [k for k in self._allocations if k[0] == uid and (not container or k[1] == container)]
        released = []
        for key in keys:
            allocation = self._allocations.pop(key)
            self._ledger.release(_pod_key(key))
            for grant in allocation.grants:
                if self._mig_holders.get(grant.uuid) == key:
                    del self._mig_holders[grant.uuid]
            released.append(allocation)
        return released

    def restore(self, allocations: Iterable[Allocation]) -> list[tuple[Allocation, str]]:
        """Book allocations read back from a checkpoint or from pods, even on unhealthy GPUs.

        Returns the ones that could not be booked (GPU gone, would over-commit) with the reason.
        """
        problems: list[tuple[Allocation, str]] = []
        for allocation in allocations:
            if allocation.key in self._allocations:
                problems.append((allocation, "duplicate allocation for this container"))
                continue
            missing = [g.gpu_uuid for g in allocation.grants if g.gpu_uuid not in self._devices]
            if missing:
                problems.append((allocation, f"GPU {missing[0]} is not on this node any more"))
                continue
            try:
                fixed = replace(allocation, grants=tuple(self._restored(g) for g in allocation.grants))
                self._take(fixed, allow_unusable=True)
            except ServiceError as exc:
                problems.append((allocation, exc.message))
                continue
            self._allocations[fixed.key] = fixed
        return problems

    def _restored(self, grant: Grant) -> Grant:
        """A grant as it stands now: its GPU's current index (indexes may change between boots; UUIDs do
        not) and, for MIG, the device that is there. Raises ServiceError when the MIG device is gone."""
        parent = self._devices[grant.gpu_uuid]
        grant = replace(grant, index=parent.index)
        if not grant.is_mig:
            return grant
        found = next(
            (
                m
                for m in parent.mig_devices
                if m.uuid == grant.uuid
                or (not grant.uuid and (m.profile, m.start) == (grant.mig_profile, grant.mig_start))
            ),
            None,
        )
        if found is None:
            what = grant.uuid or f"{grant.mig_profile} at slice {grant.mig_start}"
            raise ServiceError(Code.NOT_FOUND, f"no MIG device {what} on GPU {parent.index} (gone, or not made yet)")
        dynamic = parent.mig_mode is MigMode.DYNAMIC
        return replace(grant, uuid=found.uuid, mig_profile=found.profile, mig_start=found.start, mig_dynamic=dynamic)

    def used(self) -> dict[str, tuple[int, int]]:
        """Granted (core milli, memory MiB) per physical GPU UUID."""
        out: dict[str, tuple[int, int]] = {}
        for allocation in self._allocations.values():
            for grant in allocation.grants:
                core, mem = out.get(grant.gpu_uuid, (0, 0))
                out[grant.gpu_uuid] = (core + grant.core_milli, mem + grant.memory_mib)
        return out


def _merge_info(held: Allocation, again: Allocation) -> Allocation:
    """The held allocation with the device IDs and resource names of a repeated request added."""
    ids = held.device_ids + tuple(i for i in again.device_ids if i not in held.device_ids)
    names = held.resource_names + tuple(n for n in again.resource_names if n not in held.resource_names)
    return replace(held, device_ids=ids, resource_names=names)


def order_grants(grants: Iterable[Grant]) -> tuple[Grant, ...]:
    """Grants in the container's device-ordinal order: GPU index, then MIG start slice."""
    return tuple(sorted(grants, key=lambda g: (g.index, g.mig_start, g.uuid)))


def mig_shape_problem(gpu: DeviceInfo, profile_name: str, start: int) -> str:
    """Why `profile_name` at `start` can never exist on `gpu` (unknown profile, invalid start), or ""."""
    geo = gpu.mig_geometry
    if geo is None:
        return f"GPU {gpu.index}: no MIG profiles known for model {gpu.model}"
    profile = geo.profile(profile_name)
    if profile is None:
        return f"{gpu.model} has no MIG profile {profile_name!r}; it has {', '.join(geo.names)}"
    if start not in profile.starts:
        valid = ", ".join(str(s) for s in profile.starts)
        return f"MIG profile {profile_name} cannot start at slice {start} on {gpu.model}; valid starts: {valid}"
    return ""


def _existing_grant(parent: DeviceInfo, share: Share) -> Grant:
    """The grant of an existing MIG device, found by UUID or by profile and start."""
    if share.uuid:
        mig = next((m for m in parent.mig_devices if m.uuid == share.uuid), None)
        if mig is None:
            raise ServiceError(Code.NOT_FOUND, f"GPU {parent.index} has no MIG device {share.uuid!r}")
        if share.mig_profile and (mig.profile, mig.start) != (share.mig_profile, share.mig_start):
            raise ServiceError(
                Code.INVALID_ARGUMENT,
                f"MIG device {mig.uuid} is a {mig.profile} at slice {mig.start}, not a {share.mig_profile} at "
                f"slice {share.mig_start}",
            )
    else:
        mig = next(
            (m for m in parent.mig_devices if (m.profile, m.start) == (share.mig_profile, share.mig_start)), None
        )
        if mig is None:
            layout = ", ".join(f"{m.profile}@{m.start}" for m in parent.mig_devices) or "no MIG devices"
            raise ServiceError(
                Code.FAILED_PRECONDITION,
                f"GPU {parent.index} ({parent.mig_mode.value} MIG mode) has no {share.mig_profile} MIG device at "
                f"slice {share.mig_start}; it has {layout}",
            )
    dynamic = parent.mig_mode is MigMode.DYNAMIC
    return Grant(mig.uuid, parent.index, 0, mig.memory_mib, parent.uuid, mig.profile, mig.start, dynamic)
