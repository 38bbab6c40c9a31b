"""Per-container usage from the processes on the GPUs: the NVML backend's `usage.UsageSource`.

Each reading lists the processes (`usage.ProcessSource`, the NVML backend), finds each one's container
through `/proc/<pid>/cgroup` (`cgroups.ProcessOwners`) and joins them with the allocations
(`usage.attribute`). A process of no allocated container (outside any pod, or in a container that holds
GPUs the runtime did not grant) counts in its GPU's unattributed remainder. Caller: `service.NodeRuntime`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from runtimekit.kube.objects import Pod
from runtimekit.runtime.allocations import Allocation
from runtimekit.runtime.cgroups import ProcessOwners
from runtimekit.runtime.usage import ContainerUsage, ProcessSource, attribute


class AttributedUsage:
    """See the module docstring. `proc`: the host's /proc (tests pass a folder of fake cgroup files)."""

    name = "nvml"

    def __init__(self, source: ProcessSource, proc: Path = Path("/proc")) -> None:
        self._source = source
        self._proc = proc

    def containers(self, allocations: Sequence[Allocation], pods: Mapping[str, Pod]) -> list[ContainerUsage]:
        owners = ProcessOwners(list(pods.values()), allocations, self._proc)
        found, _unattributed = attribute(self._source.processes(), owners, allocations)
        return found
