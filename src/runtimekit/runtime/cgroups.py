"""Which pod and container a process belongs to, from its `/proc/<pid>/cgroup`.

kubelet puts each container in a cgroup under `kubepods`, named by the pod's uid and the container's
runtime ID; the shape depends on the cgroup version, kubelet's cgroup driver and the container runtime:
- cgroupfs driver: `/kubepods[/burstable|/besteffort]/pod<uid>/<id>`;
- systemd driver: `/kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<uid_with_underscores>.slice/
  <runtime>-<id>.scope`, `<runtime>` being `cri-containerd`, `crio` or `docker`;
- cgroup v1 has one line per hierarchy (`4:memory:/kubepods/...`), v2 one line (`0::/kubepods...`); a
  nested node (kind, the runtime in a container without a cgroup namespace) prefixes the path.
`parse_cgroup` reads one file's text; `ProcessOwners` maps a PID to a `usage.ProcessOwner` through the
container IDs in the pods' `status.containerStatuses` (or, when the status does not say, the pod's only
allocated container). Callers: `service.NodeRuntime` with the NVML backend. `/proc` must be the host's
(the runtime's DaemonSet runs with `hostPID`); an unreadable file means "not a container" (None).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from runtimekit.kube.objects import Pod, meta
from runtimekit.runtime.allocations import Allocation
from runtimekit.runtime.usage import ProcessOwner

_UID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}"
_POD = re.compile(rf"(?:^|[/-])pod({_UID})(?:\.slice)?(?:/|$)")
_CONTAINER = re.compile(r"^(?:(?:cri-containerd|crio|docker|cri-o)-)?([0-9a-f]{64})(?:\.scope)?$")


@dataclass(frozen=True)
class CgroupIdentity:
    """A container's cgroup: its pod's uid (with dashes) and its runtime's container ID (64 hex)."""

    pod_uid: str
    container_id: str


def parse_cgroup(text: str) -> CgroupIdentity | None:
    """The pod and container of a `/proc/<pid>/cgroup`, or None for a process outside any pod's container
    (the node's own services, a pod's sandbox or conmon)."""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        path = parts[2].rstrip("/")
        pod = _POD.search(path)
        if pod is None:
            continue
        container = _CONTAINER.match(path.rsplit("/", 1)[-1])
        if container is None:
            continue
        return CgroupIdentity(pod.group(1).replace("_", "-"), container.group(1))
    return None


def container_ids(pods: Sequence[Pod]) -> dict[tuple[str, str], str]:
    """(pod uid, container ID) -> container name, from the pods' container statuses
    (`containerd://<id>`, `cri-o://<id>`, `docker://<id>`)."""
    out: dict[tuple[str, str], str] = {}
    for pod in pods:
        uid = str(meta(pod).get("uid") or "")
        status = pod.get("status") or {}
        for item in [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]:
            cid = str(item.get("containerID") or "").rpartition("://")[2]
            if cid:
                out[(uid, cid)] = str(item.get("name") or "")
    return out


class ProcessOwners:
    """PID -> `ProcessOwner` for one reading (the pods and allocations of that instant)."""

    def __init__(self, pods: Sequence[Pod], allocations: Sequence[Allocation], proc: Path = Path("/proc")) -> None:
        self._names = container_ids(pods)
        self._only: Mapping[str, str] = _only_containers(allocations)
        self._proc = proc

    def __call__(self, pid: int) -> ProcessOwner | None:
        try:
            text = (self._proc / str(pid) / "cgroup").read_text()
        except OSError:
            return None  # gone since the driver listed it, or not ours to read
        identity = parse_cgroup(text)
        if identity is None:
            return None
        name = self._names.get((identity.pod_uid, identity.container_id)) or self._only.get(identity.pod_uid)
        return ProcessOwner(identity.pod_uid, name) if name else None


def _only_containers(allocations: Sequence[Allocation]) -> dict[str, str]:
    """Pod uid -> its container, for pods with exactly one allocated container."""
    seen: dict[str, set[str]] = {}
    for allocation in allocations:
        seen.setdefault(allocation.pod.uid, set()).add(allocation.container)
    return {uid: next(iter(names)) for uid, names in seen.items() if len(names) == 1}
