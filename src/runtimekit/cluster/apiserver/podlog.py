"""`pods/log` and `pods/exec` of the embedded API server, as kube-apiserver answers them for a node
whose kubelet is a simulated one.

kube-apiserver checks the request against the pod (a container name when the pod has several, a
known container, a host assigned, a container that has started) and then proxies to the node's
kubelet. Here the kubelet is in the same process: a `ContainerLogs` (the simulated kubelet, through
the API server's `KubeletHook`) answers with what the container's run printed so far (`ContainerLog`),
and this module filters and renders it as kubelet does (`tailLines`, `sinceSeconds`, `sinceTime`,
`limitBytes`, `timestamps`; `follow` is the handler's loop). `exec` is refused at once with a
message that says containers are simulated (kubectl prints it), never upgraded.
Pure functions over the pod and the query; called by the HTTP handlers (`handlers.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from runtimekit.cluster.apiserver.errors import ApiError, bad_request
from runtimekit.cluster.apiserver.routing import parse_bool, parse_int
from runtimekit.kube.objects import Pod

FOLLOW_POLL_S = 0.25  # how often a followed log is looked at again


@dataclass(frozen=True)
class ContainerLog:
    """What a container's run printed so far (epoch seconds, text), and whether it may print more."""

    lines: Sequence[tuple[float, str]]
    running: bool


class ContainerLogs(Protocol):
    def container_log(self, namespace: str, name: str, container: str, previous: bool) -> ContainerLog | None:
        """The current (or previous) run's log of the pod's container; None when there is no such run."""
        ...


@dataclass(frozen=True)
class LogRequest:
    """The query of a `pods/log` request (PodLogOptions)."""

    container: str = ""
    previous: bool = False
    follow: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    since_seconds: int | None = None
    since_time: float | None = None
    limit_bytes: int | None = None

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> LogRequest:
        since_time = None
        if query.get("sinceTime"):
            try:
                since_time = datetime.fromisoformat(query["sinceTime"].replace("Z", "+00:00")).timestamp()
            except ValueError:
                raise bad_request(f'parsing time "{query["sinceTime"]}" as RFC3339: cannot parse') from None
        request = cls(
            query.get("container", ""),
            parse_bool(query, "previous"),
            parse_bool(query, "follow"),
            parse_bool(query, "timestamps"),
            parse_int(query, "tailLines"),
            parse_int(query, "sinceSeconds"),
            since_time,
            parse_int(query, "limitBytes"),
        )
        for name, value in (
            ("tailLines", request.tail_lines),
            ("sinceSeconds", request.since_seconds),
            ("limitBytes", request.limit_bytes),
        ):
            if value is not None and (value < 0 or (value == 0 and name != "tailLines")):
                raise _invalid_options(name, value)
        return request


def _invalid_options(name: str, value: int) -> ApiError:
    must = "must be greater than or equal to 0" if name == "tailLines" else "must be greater than 0"
    return bad_request(f'PodLogOptions "" is invalid: {name}: Invalid value: {value}: {must}')


def _names(containers: Sequence[str]) -> str:
    return "[" + " ".join(containers) + "]"


def pick_container(pod: Pod, wanted: str) -> str:
    """The container a log or exec request is for, with kube-apiserver's refusals (400)."""
    spec = pod.get("spec") or {}
    name = str((pod.get("metadata") or {}).get("name", ""))
    containers = [str(c.get("name", "")) for c in spec.get("containers") or []]
    init = [str(c.get("name", "")) for c in spec.get("initContainers") or []]
    if not wanted:
        if len(containers) == 1:
            return containers[0]
        message = f"a container name must be specified for pod {name}, choose one of: {_names(containers)}"
        raise bad_request(message + (f" or one of the init containers: {_names(init)}" if init else ""))
    if wanted not in containers and wanted not in init:
        raise bad_request(f"container {wanted} is not valid for pod {name}")
    return wanted


def check_started(pod: Pod, container: str, previous: bool) -> None:
    """kubelet's refusals for a container without the run asked for (400)."""
    name = str((pod.get("metadata") or {}).get("name", ""))
    if not (pod.get("spec") or {}).get("nodeName"):
        raise bad_request(f"pod {name} does not have a host assigned")
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    status = next((s for s in statuses if s.get("name") == container), None)
    state = (status or {}).get("state") or {}
    if previous:
        if not ((status or {}).get("lastState") or {}).get("terminated"):
            raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        return
    waiting = state.get("waiting")
    if status is None or (isinstance(waiting, dict) and not (status.get("lastState") or {}).get("terminated")):
        reason = str(waiting.get("reason") or "") if isinstance(waiting, dict) else "ContainerCreating"
        raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason or "PodInitializing"}')


def _stamp(at: float) -> str:
    """RFC 3339 in UTC with fractional seconds, as kubelet's `timestamps=true` prefix."""
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def select(lines: Sequence[tuple[float, str]], request: LogRequest, now: float) -> list[tuple[float, str]]:
    """The lines the request asks for (since, then the tail)."""
    since = request.since_time
    if request.since_seconds is not None:
        since = now - request.since_seconds
    chosen = [line for line in lines if since is None or line[0] >= since]
    if request.tail_lines is not None:
        chosen = chosen[len(chosen) - request.tail_lines :] if request.tail_lines else []
    return chosen


def render(lines: Sequence[tuple[float, str]], request: LogRequest) -> bytes:
    text = "".join((f"{_stamp(at)} " if request.timestamps else "") + line + "\n" for at, line in lines)
    data = text.encode()
    return data if request.limit_bytes is None else data[: request.limit_bytes]


def exec_refused(pod: Pod, container: str, node: str) -> ApiError:
    """The answer to `pods/exec` (and `attach`): refused, saying why, before any upgrade."""
    name = str((pod.get("metadata") or {}).get("name", ""))
    return bad_request(
        f'cannot exec into container "{container}" of pod "{name}": containers on node "{node}" are simulated by '
        "LJ RuntimeKit's embedded cluster and run no processes (see `kubectl logs` for what the container did)"
    )


def pod_of(raw: bytes) -> Pod:
    pod: Pod = json.loads(raw)
    return pod
