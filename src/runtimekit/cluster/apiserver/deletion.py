"""Deletion semantics: preconditions, finalizers, graceful pod deletion, propagation and the cascades.

- An object with finalizers gets `deletionTimestamp` (and `deletionGracePeriodSeconds: 0`) and stays
  until an update removes the last one; then it is deleted.
- Propagation (`propagationPolicy`, or the legacy `orphanDependents`, in the DeleteOptions body or the
  query) is recorded as kube-apiserver records it, for the garbage collector to carry out:
  `Orphan` adds the `orphan` finalizer, `Foreground` the `foregroundDeletion` finalizer (each removes
  the other), `Background` removes both; without a policy, a GC finalizer the object already has is
  honoured, else Background. A delete that changes nothing else and leaves no finalizer deletes at once.
- A pod is deleted at once, unless a registered `KubeletHook` manages its node, it is not finished
  and the grace period (DeleteOptions, else `spec.terminationGracePeriodSeconds`) is above 0: then
  it is only marked, and the kubelet deletes it with grace period 0 when its containers stop.
- A namespace turns `Terminating`, its objects are deleted, and it goes once it is empty;
  `default`, `kube-system` and `kube-public` cannot be deleted.
- Deleting a CustomResourceDefinition deletes its objects and stops serving the resource.
The garbage collector itself (dependents of deleted owners) is a controller of the embedded cluster
(`runtimekit.cluster.controllers.garbagecollector`), as kube-controller-manager's is.
Called by the HTTP handlers and by `operations.Api` (an update that removes the last finalizer).
It works on what `ApiState` names of the API (`operations.Api` has it) and imports nothing of
`operations`, so the two modules do not import each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, cast

from runtimekit.base.timestamps import rfc3339
from runtimekit.cluster.apiserver.crds import CustomResourceDefinition
from runtimekit.cluster.apiserver.errors import (
    bad_request,
    conflict,
    field_invalid,
    field_unsupported,
    forbidden,
    invalid,
)
from runtimekit.cluster.apiserver.podlog import ContainerLogs
from runtimekit.cluster.apiserver.resources import ResourceInfo, ResourceTable
from runtimekit.cluster.apiserver.store import Store, Stored
from runtimekit.kube.objects import JsonObject, Pod

PROTECTED_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
POLICIES = ("Foreground", "Background", "Orphan")


class KubeletHook(ContainerLogs, Protocol):
    """A simulated kubelet taking part in pod deletion (and answering `pods/log`, `podlog.py`)."""

    def manages(self, node_name: str) -> bool:
        """True when this kubelet runs the node's pods: deleting one of them with a grace period then
        only marks it (deletionTimestamp, deletionGracePeriodSeconds) and the kubelet finishes the
        deletion with a DELETE of grace period 0 once the containers are stopped."""
        ...


class ApiState(Protocol):
    """What deletion reads and writes of the API server's state (`operations.Api`)."""

    table: ResourceTable
    store: Store
    clock: Callable[[], float]
    kubelets: list[KubeletHook]
    terminating: set[str]  # namespaces being deleted

    def resource(self, group: str, version: str, plural: str) -> ResourceInfo: ...

    def storage_of(self, info: ResourceInfo) -> ResourceInfo: ...

    def get(self, info: ResourceInfo, namespace: str, name: str) -> Stored:
        """The stored object; raises 404 NotFound when there is none."""
        ...

    def now(self) -> str: ...


class Preconditions(TypedDict, total=False):
    uid: str
    resourceVersion: str


class DeleteOptionsBody(TypedDict, total=False):
    """A `DeleteOptions` request body (the query may give the same options)."""

    gracePeriodSeconds: int
    preconditions: Preconditions
    dryRun: list[str]
    propagationPolicy: str
    orphanDependents: bool


@dataclass(frozen=True)
class DeleteOptions:
    grace_period: int | None = None
    uid: str | None = None
    resource_version: str | None = None
    dry_run: bool = False
    propagation: str | None = None  # Foreground, Background or Orphan; None: as the object's finalizers say

    @classmethod
    def parse(cls, body: Any, query: Mapping[str, str]) -> DeleteOptions:
        """From a `DeleteOptions` body (may be empty) and the query (`gracePeriodSeconds`, `dryRun`)."""
        body = body or {}
        if not isinstance(body, Mapping):
            raise bad_request("DeleteOptions must be a JSON object")
        given = cast(DeleteOptionsBody, body)
        grace = given.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        pre = given.get("preconditions") or {}
        dry = given.get("dryRun") or ([query["dryRun"]] if "dryRun" in query else [])
        try:
            grace_value = None if grace is None else int(grace)
        except (TypeError, ValueError):
            raise bad_request(f"gracePeriodSeconds must be an integer, got {grace!r}") from None
        propagation = _propagation(given.get("propagationPolicy", query.get("propagationPolicy")), given, query)
        return cls(grace_value, pre.get("uid"), pre.get("resourceVersion"), "All" in dry, propagation)


def _propagation(policy: object, body: DeleteOptionsBody, query: Mapping[str, str]) -> str | None:
    """The propagation policy asked for; `orphanDependents` (deprecated) maps to Orphan or Background."""
    orphan = body.get("orphanDependents", query.get("orphanDependents"))
    if orphan is not None and policy is not None:
        why = "orphanDependents and deletionPropagation cannot be both set"
        cause = field_invalid("propagationPolicy", policy, why)
        raise invalid("DeleteOptions", "", [cause])
    if orphan is not None:
        return "Orphan" if str(orphan).lower() in ("true", "1") else "Background"
    if policy is None or policy == "":
        return None
    if policy not in POLICIES:
        raise invalid("DeleteOptions", "", [field_unsupported("propagationPolicy", policy, list(POLICIES))])
    return str(policy)


def gc_finalizers(finalizers: list[str], propagation: str | None) -> list[str]:
    """The finalizers an object keeps when deleted with `propagation` (kube's
    deletionFinalizersForGarbageCollection): Orphan adds `orphan`, Foreground `foregroundDeletion`,
    Background drops both, None keeps what the object has."""
    if propagation is None:
        return list(finalizers)
    kept = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
    if propagation == "Orphan":
        kept.append(ORPHAN)
    elif propagation == "Foreground":
        kept.append(FOREGROUND)
    return kept


@dataclass(frozen=True)
class Deleted:
    """The outcome: the object's last state, and whether it is gone (else only marked)."""

    stored: Stored
    gone: bool


def delete(api: ApiState, info: ResourceInfo, namespace: str, name: str, options: DeleteOptions) -> Deleted:
    storage = api.storage_of(info)
    with api.store.lock:
        current = api.get(storage, namespace, name)
        obj = current.obj()
        _preconditions(info, current, obj, options)
        if storage.group == "" and storage.kind == "Namespace" and name in PROTECTED_NAMESPACES:
            raise forbidden("namespaces", name, "this namespace may not be deleted")
        if options.dry_run:
            return Deleted(current, gone=True)
        meta = obj["metadata"]
        if storage.group == "" and storage.kind == "Namespace":
            if meta.get("finalizers"):
                return Deleted(_mark(api, storage, current, obj, 0), gone=False)
            return _delete_namespace(api, storage, current, obj)
        finalizers = gc_finalizers(list(meta.get("finalizers") or []), options.propagation)
        if finalizers:
            changed = finalizers != list(meta.get("finalizers") or [])
            meta["finalizers"] = finalizers
            return Deleted(_mark(api, storage, current, obj, 0, force=changed), gone=False)
        if meta.get("finalizers"):  # only GC finalizers, all dropped (Background): delete now
            meta.pop("finalizers")
            current = api.store.put(storage, obj, current)
        grace = _pod_grace(api, storage, cast(Pod, obj), options)
        if grace:
            return Deleted(_mark(api, storage, current, obj, grace), gone=False)
        return Deleted(finish_deletion(api, storage, current, None), gone=True)


def _preconditions(info: ResourceInfo, current: Stored, obj: JsonObject, options: DeleteOptions) -> None:
    uid = obj["metadata"].get("uid")
    if options.uid and options.uid != uid:
        why = f"Precondition failed: UID in precondition: {options.uid}, UID in object meta: {uid}"
        raise conflict(info.plural, current.name, why, info.group)
    if options.resource_version and options.resource_version != str(current.rv):
        why = (
            f"the ResourceVersion in the precondition ({options.resource_version}) does not match the "
            f"ResourceVersion in record ({current.rv}). The object might have been modified"
        )
        raise conflict(info.plural, current.name, why, info.group)


def _mark(
    api: ApiState, storage: ResourceInfo, current: Stored, obj: JsonObject, grace: int, force: bool = False
) -> Stored:
    """Set deletionTimestamp (once; a shorter grace period moves it earlier); `force` stores `obj`
    even when the timestamp stays (its finalizers changed)."""
    meta = obj["metadata"]
    previous = meta.get("deletionGracePeriodSeconds")
    if meta.get("deletionTimestamp") and previous is not None and int(previous) <= grace:
        return api.store.put(storage, obj, current) if force else current
    meta["deletionTimestamp"] = _later(api, grace)
    meta["deletionGracePeriodSeconds"] = grace
    return api.store.put(storage, obj, current)


def _later(api: ApiState, seconds: int) -> str:
    return rfc3339(api.clock() + seconds)


def _pod_grace(api: ApiState, storage: ResourceInfo, pod: Pod, options: DeleteOptions) -> int:
    """The grace period a pod deletion waits for its kubelet, 0 for an immediate delete."""
    if storage.group != "" or storage.kind != "Pod":
        return 0
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    grace = options.grace_period
    if grace is None:
        grace = int(spec.get("terminationGracePeriodSeconds", 30) or 0)
    node = spec.get("nodeName")
    if grace <= 0 or not node or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    return grace if any(hook.manages(node) for hook in api.kubelets) else 0


def finish_deletion(api: ApiState, storage: ResourceInfo, current: Stored, final: JsonObject | None) -> Stored:
    """Remove the object (as `final` when given: an update that cleared the last finalizer)."""
    with api.store.lock:
        if final is not None:
            current = api.store.put(storage, final, current)
        gone = api.store.remove(storage, current)
        if storage.group == "apiextensions.k8s.io":
            _drop_custom_resources(api, cast(CustomResourceDefinition, gone.obj()))
        if storage.group == "" and storage.kind == "Namespace":
            api.terminating.discard(gone.name)
        elif storage.namespaced and gone.namespace in api.terminating:
            _finish_namespace_if_empty(api, gone.namespace)
        return gone


def _drop_custom_resources(api: ApiState, crd: CustomResourceDefinition) -> None:
    spec = crd.get("spec") or {}
    group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
    served = api.table.by_storage(f"{group}/{plural}")
    storage = next((i for i in served if i.custom and not i.view), None)
    if storage is None or storage.storage_key == "":
        return
    for stored in api.store.objects(storage):
        api.store.remove(storage, stored)
    api.table.remove(group, plural)
    api.store.drop_bucket(storage.storage)


def _namespaced_storages(api: ApiState) -> list[ResourceInfo]:
    seen: dict[str, ResourceInfo] = {}
    for info in api.table.all():
        if info.namespaced and not info.view and "create" in info.verbs:
            seen.setdefault(info.storage, api.storage_of(info))
    return list(seen.values())


def _delete_namespace(api: ApiState, storage: ResourceInfo, current: Stored, obj: JsonObject) -> Deleted:
    name = current.name
    if name not in api.terminating:
        obj["metadata"]["deletionTimestamp"] = api.now()
        obj["metadata"]["deletionGracePeriodSeconds"] = 0
        obj.setdefault("status", {})["phase"] = "Terminating"
        current = api.store.put(storage, obj, current)
        api.terminating.add(name)
        for info in _namespaced_storages(api):
            for stored in api.store.objects(info, name):
                if api.store.get(info, stored.namespace, stored.name) is not None:
                    delete(api, info, stored.namespace, stored.name, DeleteOptions())
    if _namespace_empty(api, name):
        return Deleted(api.store.remove(storage, api.get(storage, "", name)), gone=True)
    return Deleted(api.get(storage, "", name), gone=False)


def _namespace_empty(api: ApiState, namespace: str) -> bool:
    return all(api.store.count(info, namespace) == 0 for info in _namespaced_storages(api))


def _finish_namespace_if_empty(api: ApiState, namespace: str) -> None:
    ns_info = api.resource("", "v1", "namespaces")
    current = api.store.get(ns_info, "", namespace)
    if current is not None and _namespace_empty(api, namespace):
        api.store.remove(ns_info, current)
        api.terminating.discard(namespace)
