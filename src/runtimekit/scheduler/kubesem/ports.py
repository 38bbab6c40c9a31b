"""Host ports with the semantics of kube-scheduler's NodePorts plugin and `framework.HostPortInfo`.

A pod asks for the `hostPort`s of its (app) containers' ports; a port of 0 asks for nothing. An
empty `hostIP` means 0.0.0.0 and an empty protocol TCP. Two ports conflict when protocol and port
are equal and either the IPs are equal or one of them is 0.0.0.0 (it binds every address).

Pure; callers: the pod parsing in this package and the predicates plugin.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from runtimekit.kube.objects import PodSpec

ANY_IP = "0.0.0.0"
REASON = "node(s) didn't have free ports for the requested pod ports"


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int


def host_ports(spec: PodSpec) -> tuple[HostPort, ...]:
    """The host ports a pod spec asks for, in container order (invalid entries are left out)."""
    out: list[HostPort] = []
    for container in spec.get("containers") or []:
        if not isinstance(container, Mapping):
            continue
        for port in container.get("ports") or []:
            if not isinstance(port, Mapping):
                continue
            number = port.get("hostPort")
            if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
                continue
            out.append(HostPort(str(port.get("hostIP") or ANY_IP), str(port.get("protocol") or "TCP"), number))
    return tuple(out)


class PortsInUse:
    """The host ports the pods on one node hold, as a multiset (two pods may hold the same port when
    they were placed regardless of it, e.g. with spec.nodeName)."""

    def __init__(self, ports: Iterable[HostPort] = ()) -> None:
        self._held: Counter[HostPort] = Counter()
        self._by_pair: Counter[tuple[str, int]] = Counter()
        for port in ports:
            self.add(port)

    def add(self, port: HostPort) -> None:
        self._held[port] += 1
        self._by_pair[(port.protocol, port.port)] += 1

    def remove(self, port: HostPort) -> None:
        if self._held[port] > 0:
            self._held[port] -= 1
            self._by_pair[(port.protocol, port.port)] -= 1

    def conflicts(self, port: HostPort) -> bool:
        pair = (port.protocol, port.port)
        if self._by_pair[pair] <= 0:
            return False
        if port.ip == ANY_IP:
            return True
        held = self._held
        return held[HostPort(port.ip, *pair)] > 0 or held[HostPort(ANY_IP, *pair)] > 0

    def any_conflict(self, wanted: Iterable[HostPort]) -> bool:
        return any(self.conflicts(p) for p in wanted)

    def __bool__(self) -> bool:
        return any(count > 0 for count in self._by_pair.values())
