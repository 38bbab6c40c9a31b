"""`PATCH` with `application/apply-patch+yaml`: server-side apply as a request, around `apply.apply`.

`server_side_apply` checks what kube-apiserver checks (a `fieldManager` is required, the applied
configuration names the object of the URL and sends no managedFields), then creates the object when
it does not exist (the configuration is the object) or merges the configuration into the stored
object; the write itself (dry run, admission webhooks, validation, defaults, `/status`) is the
server's ordinary create or update. `Owner` is the field manager of any write (`managedfields.py`).
Functions over what `ApplyingApi` names of `operations.Api` (no import of it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from runtimekit.cluster.apiserver.admission.requests import Admit
from runtimekit.cluster.apiserver.apply import apply
from runtimekit.cluster.apiserver.bodies import decode_body
from runtimekit.cluster.apiserver.errors import bad_request, field_required, invalid, not_found
from runtimekit.cluster.apiserver.managedfields import Writer
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.cluster.apiserver.store import Store, Stored
from runtimekit.cluster.apiserver.typed import FieldValidation
from runtimekit.kube.objects import JsonObject

APPLY_PATCH = "application/apply-patch+yaml"


@dataclass(frozen=True)
class Owner:
    """The field manager of a write; `applied` when an apply made the object's managedFields already."""

    manager: str
    applied: bool = False
    force: bool = False
    subresource: str = ""  # the subresource its entry names when not the request's own (`scale`)


@dataclass(frozen=True)
class ApplyRequest:
    info: ResourceInfo
    namespace: str
    name: str
    body: bytes
    owner: Owner | None
    subresource: str
    dry_run: bool
    validation: FieldValidation


class ApplyingApi(Protocol):
    store: Store

    def storage_of(self, info: ResourceInfo) -> ResourceInfo: ...

    def check_type(self, info: ResourceInfo, body: Any, validation: FieldValidation = ...) -> JsonObject: ...

    def served_obj(self, info: ResourceInfo, stored: Stored) -> JsonObject: ...

    def writer(self, info: ResourceInfo, storage: ResourceInfo, manager: str, subresource: str) -> Writer: ...

    def now(self) -> str: ...

    def create(
        self,
        info: ResourceInfo,
        namespace: str,
        body: Any,
        *,
        dry_run: bool = ...,
        validation: FieldValidation = ...,
        admit: Admit | None = ...,
        owner: Owner | None = ...,
    ) -> Stored: ...

    def write_with(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        patched: Callable[[Stored], JsonObject],
        subresource: str,
        dry_run: bool,
        admit: Admit | None,
        owner: Owner | None,
    ) -> Stored: ...


def server_side_apply(api: ApplyingApi, request: ApplyRequest, admit: Admit | None) -> Stored:
    info, owner = request.info, request.owner
    if owner is None or not owner.manager:
        raise invalid(
            "PatchOptions", "", [field_required("fieldManager", "is required for apply patch")], "meta.k8s.io"
        )
    config = api.check_type(info, decode_body(request.body, "application/yaml", info.kind), request.validation)
    meta = config["metadata"]
    if meta.get("managedFields") is not None:
        raise bad_request("metadata.managedFields must be nil")
    if meta.get("name", request.name) != request.name:
        raise bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL ({request.name})"
        )
    meta["name"] = request.name
    if info.namespaced:
        if meta.get("namespace", request.namespace) != request.namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        meta["namespace"] = request.namespace
    storage = api.storage_of(info)
    writer = api.writer(info, storage, owner.manager, request.subresource)
    applied = Owner(owner.manager, applied=True)
    if api.store.get(storage, request.namespace if info.namespaced else "", request.name) is None:
        if request.subresource:
            raise not_found(info.plural, request.name, info.group)
        created = apply(None, config, writer, owner.force, api.now())
        return api.create(
            info,
            request.namespace,
            created,
            dry_run=request.dry_run,
            validation=request.validation,
            admit=admit,
            owner=applied,
        )

    def patched(current: Stored) -> JsonObject:
        live = api.served_obj(info, current)
        return api.check_type(info, apply(live, config, writer, owner.force, api.now()), FieldValidation.IGNORE)

    return api.write_with(
        info, request.namespace, request.name, patched, request.subresource, request.dry_run, admit, applied
    )


def keep_applied(new: JsonObject, applied: JsonObject) -> None:
    """The managedFields an apply made, on the object an update stores (`/status` starts from the old one)."""
    fields = applied["metadata"].get("managedFields")
    if fields:
        new["metadata"]["managedFields"] = fields
    else:
        new["metadata"].pop("managedFields", None)
