"""Writes with admission webhooks: where `operations.Api` calls them, outside the store's lock.

`mutated_create` runs the mutating webhooks on a new object as kube-apiserver does, after the
request's defaults (a pod's spec is defaulted first, so webhooks see `schedulerName:
default-scheduler` and the rest) and before the generated name; `operations.Api.create` then asks the
validating webhooks with the object as it would be stored. `admitted_write` is an update or patch:
the mutating webhooks get the object as the request makes it with the stored one as the old object,
the validating ones the object the update would store, and the write starts over from the stored
object when it changed meanwhile (kube-apiserver's GuaranteedUpdate), at most `ATTEMPTS` times.
Functions over what `WritingApi` names of `operations.Api` (no import of it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

from runtimekit.cluster.apiserver import conversion
from runtimekit.cluster.apiserver.admission.requests import Admit
from runtimekit.cluster.apiserver.applying import Owner
from runtimekit.cluster.apiserver.defaults import pod_spec
from runtimekit.cluster.apiserver.errors import bad_request, stale
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.cluster.apiserver.store import Store, Stored
from runtimekit.cluster.apiserver.typed import FieldValidation
from runtimekit.kube.objects import JsonObject, PodSpec, meta

ATTEMPTS = 5
_NAMESPACE = "the namespace of the provided object does not match the namespace sent on the request"


class WritingApi(Protocol):
    store: Store

    def storage_of(self, info: ResourceInfo) -> ResourceInfo: ...

    def get(self, info: ResourceInfo, namespace: str, name: str) -> Stored: ...

    def check_type(self, info: ResourceInfo, body: Any, validation: FieldValidation = ...) -> JsonObject: ...

    def prepare_write(
        self,
        info: ResourceInfo,
        storage: ResourceInfo,
        current: Stored,
        obj: JsonObject,
        subresource: str,
        owner: Owner | None = ...,
    ) -> tuple[JsonObject, JsonObject]: ...

    def commit_write(
        self, storage: ResourceInfo, current: Stored, old: JsonObject, new: JsonObject, subresource: str, dry_run: bool
    ) -> Stored: ...


def _checked(api: WritingApi, info: ResourceInfo, mutated: JsonObject | None, name: str, namespace: str) -> JsonObject:
    """A webhook's object read as the server reads a body (unknown fields dropped, as kube-apiserver
    decodes a patched object), still naming the request's object."""
    obj = api.check_type(info, mutated, FieldValidation.IGNORE)
    if name and meta(obj).get("name") != name:
        raise bad_request(
            f"the name of the object ({meta(obj).get('name', '')}) does not match the name on the URL ({name})"
        )
    if info.namespaced and meta(obj).get("namespace", namespace) != namespace:
        raise bad_request(_NAMESPACE)
    return obj


def mutated_create(api: WritingApi, info: ResourceInfo, obj: JsonObject, namespace: str, admit: Admit) -> JsonObject:
    if info.group == "" and info.kind == "Pod" and isinstance(obj.get("spec"), dict):
        pod_spec(cast(PodSpec, obj["spec"]))
    namespace = meta(obj).get("namespace", namespace)
    return _checked(api, info, admit.mutate(obj, None), "", namespace)


def admitted_write(
    api: WritingApi,
    info: ResourceInfo,
    namespace: str,
    name: str,
    make: Callable[[Stored], JsonObject],
    admit: Admit,
    subresource: str,
    dry_run: bool,
    owner: Owner | None = None,
) -> Stored:
    """An update (`make` gives the request's object) or a patch (`make` applies it to the stored one)."""
    storage = api.storage_of(info)
    for _ in range(ATTEMPTS):
        current = api.get(storage, namespace, name)
        old = current.obj()
        obj = _checked(api, info, admit.mutate(make(current), old), name, namespace)
        if conversion.needs_conversion(info, storage):
            obj = conversion.to_stored(info, storage, obj)
        with api.store.lock:
            if api.store.get(storage, current.namespace, current.name) is not current:
                continue
            old, new = api.prepare_write(info, storage, current, obj, subresource, owner)
        admit.validate(new, old)
        with api.store.lock:
            if api.store.get(storage, current.namespace, current.name) is current:
                return api.commit_write(storage, current, old, new, subresource, dry_run)
    raise stale(info.plural, name, info.group)
