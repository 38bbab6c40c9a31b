"""Who may write a pod's GPU assignment: the kit's scheduler only.

The assignment annotation decides which GPUs a container sees (docs/security.md). The scheduler
writes it, its signature and the assume time with the Binding; anyone else who creates a pod with them,
changes or removes them on an existing pod, or binds a pod with them, is refused, naming the
annotation and the user. The device plugin's signature check stays the guard at admission on the node;
this refuses the write before it is stored. The scheduler is known by its username in the
AdmissionReview (`system:serviceaccount:<namespace>:<name>` of its ServiceAccount). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from runtimekit.protocol import KitProtocol
from runtimekit.webhook.review import Problem, forbidden


def scheduler_keys(protocol: KitProtocol) -> tuple[str, ...]:
    names = protocol.annotations
    return tuple(k for k in (names.assignment, names.assignment_signature, names.assume_time) if k)


def _forbidden(key: str, user: str) -> Problem:
    return forbidden(f"metadata.annotations[{key}]", f"only the kit's scheduler writes it, not {user}")


def written_problems(
    annotations: Mapping[str, str],
    old: Mapping[str, str] | None,
    user: str,
    schedulers: frozenset[str],
    protocol: KitProtocol,
) -> list[Problem]:
    """The scheduler's annotations `user` writes: set on a new object (`old` None), or set, changed or
    removed on an existing one."""
    if user in schedulers:
        return []
    keys = scheduler_keys(protocol)
    if old is None:
        return [_forbidden(k, user) for k in keys if k in annotations]
    return [_forbidden(k, user) for k in keys if annotations.get(k) != old.get(k)]
