"""What a conf reload may not take away unasked: the plugins that allocate GPUs while pods ask for them.

A conf without `gpushare` or `mig` (`tiers: null`, Volcano's default conf, `enableDevice: false`) checks
clean, and at start-up the check only warns, since a scheduler may run without GPUs. Applied live to a
scheduler that places GPU pods, though, it leaves every pod asking for the protocol's GPU resources
(`resources.gpu`, `resources.core` and `resources.memory`, `resources.migPrefix<profile>`) Pending with
no word of why. So the live scheduler's reload (`server.py`) asks `gpu_plugins_lost` of each conf that
checks clean and refuses it, as it refuses a conf with errors, when the new conf allocates fewer kinds
of GPU request than the running one and a pod this scheduler knows of (pending, or bound and holding
resources) asks for one of them. `--allow-conf-without-gpu-plugin` lets such a conf through.

"Allocates" means what the conf check means by it (`framework/check.py` `covered_kinds`): an enabled
DeviceAllocate plugin (gpushare, its aliases and deviceshare; mig) that places that kind. `predicates`
with Volcano's GPU arguments places nothing here, so it does not count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from runtimekit.model import GpuKind
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.framework.check import covered_kinds, kind_names
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.interfaces import PluginLists

ALLOW_FLAG = "--allow-conf-without-gpu-plugin"
NAMED = 3  # pods named in the message at most


def gpu_plugins_lost(
    running: PluginLists,
    new: PluginLists,
    known: Callable[[], Iterable[TaskInfo]],
    protocol: KitProtocol,
    source: str,
) -> str | None:
    """Why the conf of `new` may not replace that of `running` while the tasks `known` returns exist
    (naming the kinds it drops that they ask for, and a few of them), or None when it may: it allocates
    every kind of GPU request the running conf does, or no task asks for one it drops. `known` is
    called only when a kind is dropped (it copies the cache under its lock)."""
    lost = covered_kinds(running) - covered_kinds(new)
    if not lost:
        return None
    asking = [t for t in known() if any(c.gpu.kind in lost for c in t.request.gpus)]
    if not asking:
        return None
    asked = {c.gpu.kind for t in asking for c in t.request.gpus}
    names = kind_names(protocol)
    kinds = [kind for kind in GpuKind if kind in lost & asked]
    what = " and ".join(names[kind][0] for kind in kinds)
    plugins = " and ".join(dict.fromkeys(names[kind][1] for kind in kinds))
    named = ", ".join(f"{t.namespace}/{t.name}" for t in sorted(asking, key=lambda t: (t.namespace, t.name))[:NAMED])
    more = f" and {len(asking) - NAMED} more" if len(asking) > NAMED else ""
    return (
        f"{source}: no plugin would allocate {what} any more, and {len(asking)} pod(s) ask for them "
        f"({named}{more}): pods asking for them would stay Pending; keep {plugins} in a tier "
        f"(enableDevice left on), or start the scheduler with {ALLOW_FLAG} to allow such a conf"
    )
