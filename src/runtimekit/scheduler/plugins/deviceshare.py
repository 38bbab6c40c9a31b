"""`deviceshare`: Volcano's GPU-sharing plugin name, run by `gpushare` (same predicate, score, GPU
choice, Reserve and PreBind), so Volcano's GPU-sharing confs load and place GPU pods. Pods ask in the
protocol's resource names (docs/user-guide/requests.md), not Volcano's `volcano.sh/gpu-*`.

Volcano's arguments, and what each means here:

- `deviceshare.GPUSharingEnable`: shares of one GPU (core percent and memory); `deviceshare.GPUNumberEnable`:
  whole GPUs; `deviceshare.VGPUEnable`: both, on one or several GPUs (vGPU's number, memory and cores).
  With none set, both (what gpushare places). As in Volcano, sharing and number together, or either
  with vGPU, is an error.
- `deviceshare.SchedulePolicy`: `binpack` or `spread` (gpushare's policies of those names), or any
  gpushare policy (`packfrag`, `fgd`, ...); unset: gpushare's default (packfrag).
- `deviceshare.ScheduleWeight`: multiplies the policy's 0-100 node score, as in Volcano; unset: 1
  (Volcano's unset 0 leaves nodes unscored by devices: write 0 for that; the GPUs inside the chosen
  node are still picked by the policy).
- `deviceshare.NodeLockEnable`, `deviceshare.KnownGeometriesCMName/Namespace`: accepted, no effect
  (bookings go through the scheduler's own ledger; GPU geometry comes from the node's device
  annotation): a warning says so. `deviceshare.AscendMindClusterVNPUEnable`,
  `deviceshare.AscendHAMiVNPUEnable`: Ascend NPUs are not managed here: a warning when set.
- `deviceshare.GPUExclusiveRules` is refused: pods it would keep apart could share a GPU here.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtimekit.model import GpuKind
from runtimekit.scheduler.framework.arguments import ArgumentError, Arguments, parse_arguments
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.plugins.gpushare.plugin import GpuShareArgs, GpuSharePlugin
from runtimekit.scheduler.plugins.gpushare.policies import DEFAULT_POLICY, POLICIES

NAME = "deviceshare"
_ALIASES = {
    "GPUSharingEnable": "gpu_sharing_enable",
    "GPUNumberEnable": "gpu_number_enable",
    "VGPUEnable": "vgpu_enable",
    "NodeLockEnable": "node_lock_enable",
    "SchedulePolicy": "schedule_policy",
    "ScheduleWeight": "schedule_weight",
    "AscendMindClusterVNPUEnable": "ascend_mind_cluster_vnpu_enable",
    "AscendHAMiVNPUEnable": "ascend_hami_vnpu_enable",
    "KnownGeometriesCMName": "known_geometries_cm_name",
    "KnownGeometriesCMNamespace": "known_geometries_cm_namespace",
}


@dataclass(frozen=True)
class DeviceShareArgs:
    gpu_sharing_enable: bool = False
    gpu_number_enable: bool = False
    vgpu_enable: bool = False
    node_lock_enable: bool = False
    schedule_policy: str = ""
    schedule_weight: float = 1.0
    ascend_mind_cluster_vnpu_enable: bool = False
    ascend_hami_vnpu_enable: bool = False
    known_geometries_cm_name: str = ""
    known_geometries_cm_namespace: str = ""

    def __post_init__(self) -> None:
        if self.gpu_sharing_enable and self.gpu_number_enable:
            raise ArgumentError(f"{NAME}: GPUSharingEnable and GPUNumberEnable cannot both be true (as in Volcano)")
        if (self.gpu_sharing_enable or self.gpu_number_enable) and self.vgpu_enable:
            raise ArgumentError(f"{NAME}: GPU sharing or number and VGPUEnable cannot be used together (as in Volcano)")
        if self.schedule_policy and self.schedule_policy not in POLICIES:
            raise ArgumentError(
                f"{NAME}: unknown SchedulePolicy {self.schedule_policy!r}; known: {', '.join(POLICIES)}"
            )
        if self.schedule_weight < 0:
            raise ArgumentError(f"{NAME}: ScheduleWeight must not be negative, got {self.schedule_weight:g}")

    @property
    def kinds(self) -> frozenset[GpuKind]:
        if self.gpu_sharing_enable:
            return frozenset({GpuKind.SHARE})
        if self.gpu_number_enable:
            return frozenset({GpuKind.WHOLE})
        return frozenset({GpuKind.SHARE, GpuKind.WHOLE})  # VGPUEnable, or nothing said


class DeviceShare(GpuSharePlugin):
    name = NAME


def build(arguments: Arguments, context: BuildContext) -> DeviceShare:
    if any(key.endswith("GPUExclusiveRules") for key in arguments):
        raise ArgumentError(f"{NAME}: GPUExclusiveRules is not supported here (pods it keeps apart could share a GPU)")
    args = parse_arguments(DeviceShareArgs, NAME, arguments, _ALIASES)
    ignored = [
        key
        for key, set_ in (
            ("NodeLockEnable", args.node_lock_enable),
            ("KnownGeometriesCMName", bool(args.known_geometries_cm_name)),
            ("KnownGeometriesCMNamespace", bool(args.known_geometries_cm_namespace)),
        )
        if set_
    ]
    for key in ignored:
        context.warn(f"{NAME}: {NAME}.{key} has no effect here (the scheduler books GPUs in its own ledger)")
    for key, set_ in (
        ("AscendMindClusterVNPUEnable", args.ascend_mind_cluster_vnpu_enable),
        ("AscendHAMiVNPUEnable", args.ascend_hami_vnpu_enable),
    ):
        if set_:
            context.warn(f"{NAME}: {NAME}.{key}: Ascend NPUs are not managed by this scheduler; ignored")
    if not (args.gpu_sharing_enable or args.gpu_number_enable or args.vgpu_enable):
        context.warn(f"{NAME}: no device kind enabled (GPUSharingEnable, GPUNumberEnable, VGPUEnable): it places both")
    shared = GpuShareArgs(policy=args.schedule_policy or DEFAULT_POLICY, weight=args.schedule_weight)
    return DeviceShare(shared, context, kinds=args.kinds)
