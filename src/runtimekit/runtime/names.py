"""The names in a request to the runtime, held to the rules kubelet's own requests come under.

kubelet only ever allocates for pods the API server admitted: their namespace is a DNS label, their
name a DNS subdomain and their containers' names DNS labels (at most 63 characters), and the
resource is an extended resource name (kubelet registers no device plugin for any other). The
runtime keeps these names in its checkpoint, its journal and its answers, so it refuses any other
(a 1 MB container name) with INVALID_ARGUMENT naming the field, quoting at most the first
`QUOTED` characters of the value. Called by `NodeRuntime.allocate` and `NodeRuntime.release`.
"""

from __future__ import annotations

from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.kube.semantics.names import check_dns_label, check_dns_subdomain, is_extended_resource_name
from runtimekit.runtime.values import AllocateInput

QUOTED = 64


def check_allocate(request: AllocateInput) -> None:
    """Raise INVALID_ARGUMENT for a name no pod kubelet admits could have."""
    pod = request.pod
    _check("Allocate", "pod namespace", pod.namespace, check_dns_label(pod.namespace))
    _check("Allocate", "pod name", pod.name, check_dns_subdomain(pod.name))
    _check("Allocate", "container name", request.container, check_dns_label(request.container))
    name = request.resource_name
    if name and not is_extended_resource_name(name):
        problem = "must be an extended resource name (a domain-prefixed qualified name outside kubernetes.io)"
        _check("Allocate", "resource name", name, problem)


def check_release(container: str) -> None:
    if container:
        _check("Release", "container name", container, check_dns_label(container))


def _check(method: str, field: str, value: str, problem: str | None) -> None:
    if problem is not None:
        raise ServiceError(Code.INVALID_ARGUMENT, f"{method}: {field} {_quote(value)} {problem}")


def _quote(value: str) -> str:
    if len(value) <= QUOTED:
        return repr(value)
    return f"{value[:QUOTED]!r}... ({len(value)} characters)"
