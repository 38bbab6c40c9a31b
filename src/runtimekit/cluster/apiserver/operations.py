"""The API's write semantics, independent of HTTP: create, update, patch, status, binding.

`Api` checks a request the way kube-apiserver does (type and name checks, validation, namespace
existence, resourceVersion and UID preconditions), fills in system metadata and defaults, keeps the
status of kinds with a status subresource apart from their main resource, bumps `generation` on spec
changes, skips no-op writes, and registers CustomResourceDefinitions. Deletion (finalizers, graceful
pod deletion, namespace and CRD cascades) is in `deletion.py`. Every refusal is an `ApiError`.
Callers: the HTTP handlers, and in-process code that wants to seed objects quickly.
"""

from __future__ import annotations

import copy
import random
import time
import uuid
from collections.abc import Callable
from typing import Any, cast

from runtimekit.base.timestamps import rfc3339
from runtimekit.cluster.apiserver import (
    applying,
    binding,
    conversion,
    crds,
    dravalidation,
    storageadmission,
    typed,
    validation,
    vcjob_admission,
    workloads,
)
from runtimekit.cluster.apiserver.admission.admitted import admitted_write, mutated_create
from runtimekit.cluster.apiserver.admission.checks import check_configuration
from runtimekit.cluster.apiserver.admission.requests import Admit
from runtimekit.cluster.apiserver.bodies import decode_body
from runtimekit.cluster.apiserver.crschema import SchemaSet
from runtimekit.cluster.apiserver.defaults import apply_defaults, apply_update_defaults
from runtimekit.cluster.apiserver.deletion import KubeletHook, finish_deletion
from runtimekit.cluster.apiserver.errors import (
    ApiError,
    Cause,
    already_exists,
    bad_request,
    conflict,
    forbidden,
    invalid,
    not_found,
    stale,
    unprocessable,
    unsupported_media_type,
)
from runtimekit.cluster.apiserver.fieldpaths import Place
from runtimekit.cluster.apiserver.managedfields import Writer, track_update
from runtimekit.cluster.apiserver.openapi import ShapeSet
from runtimekit.cluster.apiserver.patch import (
    PatchApplyError,
    PatchFormatError,
    json_patch,
    merge_patch,
    strategic_merge,
)
from runtimekit.cluster.apiserver.patchschema import schema_for
from runtimekit.cluster.apiserver.resources import ResourceInfo, ResourceTable
from runtimekit.cluster.apiserver.store import Store, Stored
from runtimekit.cluster.apiserver.typed import FieldValidation
from runtimekit.kube import jsoncodec
from runtimekit.kube.objects import (
    JsonObject,
    ObjectMeta,
    PersistentVolumeClaim,
    Pod,
    PriorityClass,
    StorageClass,
    VolcanoJob,
)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = applying.APPLY_PATCH
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_PATCH)
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_SYSTEM_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")

WARN = FieldValidation.WARN
__all__ = ["Api", "decode_body"]


def _spec_part(obj: JsonObject) -> JsonObject:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class Api:
    """Write semantics over a `Store` and a `ResourceTable`; `clock` and `rng` are injected."""

    def __init__(
        self,
        table: ResourceTable,
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        shapes: ShapeSet | None = None,
        schemas: SchemaSet | None = None,
    ) -> None:
        self.table = table
        self.shapes = shapes  # the kinds' OpenAPI shapes: bodies are decoded as kube-apiserver does
        self.schemas = schemas or SchemaSet()  # custom kinds' structural schemas, checked on every write
        self.store = store
        self.clock = clock
        self.rng = rng or random.Random()
        self.kubelets: list[KubeletHook] = []
        self.terminating: set[str] = set()  # namespaces being deleted
        self._places: dict[tuple[str, str], Place] = {}  # the field-ownership schema of each kind

    # lookups --------------------------------------------------------------------------------------

    def resource(self, group: str, version: str, plural: str) -> ResourceInfo:
        info = self.table.lookup(group, version, plural)
        if info is None:
            raise not_found(plural, "", group)
        return info

    def storage_of(self, info: ResourceInfo) -> ResourceInfo:
        return self.table.storage_resource(info.storage) or info

    def get(self, info: ResourceInfo, namespace: str, name: str) -> Stored:
        found = self.store.get(info, namespace if info.namespaced else "", name)
        if found is None:
            raise not_found(info.plural, name, info.group)
        return found

    def served(self, info: ResourceInfo, stored: Stored) -> bytes:
        return conversion.served_bytes(info, self.storage_of(info), stored)

    def served_obj(self, info: ResourceInfo, stored: Stored) -> JsonObject:
        return (
            conversion.to_served(info, stored.obj())
            if conversion.needs_conversion(info, self.storage_of(info))
            else stored.obj()
        )

    def now(self) -> str:
        return rfc3339(self.clock())

    # request checks -------------------------------------------------------------------------------

    def check_type(self, info: ResourceInfo, body: Any, validation: FieldValidation = WARN) -> JsonObject:
        if not isinstance(body, dict):
            raise bad_request(f"the object provided is unrecognized (must be of type {info.kind}): not a JSON object")
        api_version = body.setdefault("apiVersion", info.api_version)
        kind = body.setdefault("kind", info.kind)
        if api_version != info.api_version and kind == info.kind:
            expected = info.api_version
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version ({expected})"
            )
        if kind != info.kind:
            version = str(api_version).rpartition("/")[2]
            raise bad_request(
                f'{kind} in version "{version}" cannot be handled as a {info.kind}: '
                f"the kind in the data ({kind}) does not match the expected kind ({info.kind})"
            )
        shape = self.shapes.root(info.api_version, info.kind) if self.shapes is not None else None
        if shape is not None:
            body = typed.decode(shape, body, info.kind, info.version, validation)
        meta = body.setdefault("metadata", {})
        ordered = {"kind": kind, "apiVersion": api_version, "metadata": meta}
        ordered.update(body)
        body.clear()
        body.update(ordered)
        if not isinstance(meta, dict):
            raise bad_request(
                f"the object provided is unrecognized (must be of type {info.kind}): metadata must be an object"
            )
        checked: JsonObject = body
        return checked

    def _check_namespace(self, info: ResourceInfo, obj: JsonObject, namespace: str) -> None:
        meta = obj["metadata"]
        if not info.namespaced:
            meta.pop("namespace", None)
            return
        given = meta.get("namespace") or namespace
        if namespace and given != namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        if not given:
            raise bad_request("the namespace of the object is required")
        meta["namespace"] = given

    def _check_name(self, obj: JsonObject, name: str) -> None:
        given = obj["metadata"].get("name", "")
        if given != name:
            raise bad_request(f"the name of the object ({given}) does not match the name on the URL ({name})")

    def _namespace_ready(self, info: ResourceInfo, namespace: str, name: str) -> None:
        if not info.namespaced:
            return
        ns_info = self.resource("", "v1", "namespaces")
        found = self.store.get(ns_info, "", namespace)
        if found is None:
            raise not_found("namespaces", namespace)
        if namespace in self.terminating:
            why = f"unable to create new content in namespace {namespace} because it is being terminated"
            raise forbidden(info.plural, name, why, info.group)

    def validate(self, info: ResourceInfo, obj: JsonObject, old: JsonObject | None) -> None:
        meta = obj["metadata"]
        causes: list[Cause] = []
        if old is None:
            causes += validation.check_name(meta.get("name"), info.name_rule)
        causes += validation.check_metadata(meta)
        if info.group == "" and info.kind == "Pod":
            pod = cast(Pod, obj)
            causes += validation.check_pod(pod) if old is None else validation.check_pod_update(cast(Pod, old), pod)
        if info.group == "" and info.kind in ("ConfigMap", "Secret") and old is not None:
            causes += validation.check_config_update(info.kind, old, obj)
        if info.group == "apiextensions.k8s.io":
            causes += crds.check_crd(cast(crds.CustomResourceDefinition, obj))
        if info.group == "admissionregistration.k8s.io":
            causes += check_configuration(info.kind, obj)
        if info.group == "apps" and info.kind in workloads.KINDS:
            causes += workloads.check_workload(cast(workloads.Workload, obj), cast("workloads.Workload | None", old))
        if info.group == "resource.k8s.io":
            causes += dravalidation.check(info.kind, obj, old)
        if info.custom:
            causes += self.schemas.check(info.api_version, info.kind, obj, old)
        if causes:
            raise invalid(info.kind, str(meta.get("name", "")), causes, info.group)
        if vcjob_admission.is_job(info.group, info.kind):
            vcjob_admission.admit_job(cast(VolcanoJob, obj), cast("VolcanoJob | None", old))

    # create ---------------------------------------------------------------------------------------

    def create(
        self,
        info: ResourceInfo,
        namespace: str,
        body: Any,
        *,
        dry_run: bool = False,
        validation: FieldValidation = WARN,
        admit: Admit | None = None,
        owner: applying.Owner | None = None,
    ) -> Stored:
        obj = self.check_type(info, body, validation)
        self._check_namespace(info, obj, namespace)
        if admit is not None:
            obj = mutated_create(self, info, obj, namespace, admit)
        storage = self.storage_of(info)
        obj = conversion.to_stored(info, storage, obj) if conversion.needs_conversion(info, storage) else obj
        meta = obj["metadata"]
        with self.store.lock:
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = self._generate_name(storage, meta)
            if vcjob_admission.is_job(storage.group, storage.kind):  # its mutating webhook runs before validation
                vcjob_admission.apply_job_defaults(cast(VolcanoJob, obj))
            self.validate(info, obj, None)
            self._namespace_ready(info, meta.get("namespace", ""), meta["name"])
            if _set_resource_version(meta.get("resourceVersion")):
                # kube-apiserver's storage refuses this with a 500: a client must not re-create what it read
                raise ApiError(500, "InternalError", "resourceVersion should not be set on objects to be created", {})
            if self.store.get(storage, meta.get("namespace", ""), meta["name"]) is not None:
                raise _already_exists(info, meta["name"])
            given = meta.get("managedFields")
            self._init_metadata(storage, obj)
            if owner is not None:
                self._own_new(info, storage, obj, given, owner)
            if admit is None:
                return self._store_new(storage, obj, dry_run)
        admit.validate(obj, None)  # outside the lock: a webhook may take seconds
        with self.store.lock:
            if self.store.get(storage, meta.get("namespace", ""), meta["name"]) is not None:
                raise _already_exists(info, meta["name"])
            return self._store_new(storage, obj, dry_run)

    def _own_new(
        self, info: ResourceInfo, storage: ResourceInfo, obj: JsonObject, given: object, owner: applying.Owner
    ) -> None:
        """managedFields of a new object: an apply's as it made them, else the creator's Update entry."""
        if given:
            obj["metadata"]["managedFields"] = cast(list[JsonObject], given)
        if not owner.applied:
            track_update(None, obj, self.writer(info, storage, owner.manager, ""), self.now())

    def writer(self, info: ResourceInfo, storage: ResourceInfo, manager: str, subresource: str) -> Writer:
        """Field ownership of a write: the kind's schema, as server-side apply reads it."""
        crd = self.schemas.node(storage.api_version, storage.kind) if info.custom else None
        key = (storage.api_version, storage.kind)
        place = self._places.get(key)
        if place is None or place.crd is not crd:  # made once per kind (and again when its CRD changes)
            if info.custom:
                place = Place(crd=crd)
            else:
                shape = self.shapes.root(storage.api_version, storage.kind) if self.shapes is not None else None
                place = Place(shape, schema_for(storage.kind))
            self._places[key] = place
        return Writer(manager, info.api_version, subresource, storage.has_status, place)

    def _store_new(self, storage: ResourceInfo, obj: JsonObject, dry_run: bool) -> Stored:
        if dry_run:
            return self.store.make(storage, obj, self.store.rv)
        stored = self.store.put(storage, obj, None)
        if storage.group == "apiextensions.k8s.io":
            self.register_crd(cast(crds.CustomResourceDefinition, obj))
        return stored

    def register_crd(self, crd: crds.CustomResourceDefinition) -> None:
        """Serve what a written (or restored) CRD declares, and check its objects by its schemas."""
        self.table.add(crds.crd_resources(crd))
        self.schemas.add_crd(crd)

    def _generate_name(self, storage: ResourceInfo, meta: ObjectMeta) -> str:
        base = str(meta["generateName"])[:58]
        for _ in range(8):
            name = base + "".join(self.rng.choice(_NAME_CHARS) for _ in range(5))
            if self.store.get(storage, meta.get("namespace", ""), name) is None:
                return name
        return name

    def _init_metadata(self, storage: ResourceInfo, obj: JsonObject) -> None:
        meta = obj["metadata"]
        for key in (*_SYSTEM_META, "resourceVersion", "selfLink", "managedFields"):
            meta.pop(key, None)
        _omit_empty(meta)
        meta["uid"] = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        meta["creationTimestamp"] = self.now()
        if storage.tracks_generation:
            meta["generation"] = 1
        if storage.has_status and not storage.create_keeps_status:
            obj.pop("status", None)
        apply_defaults(storage.group, storage.kind, obj)
        if storage.group == "" and storage.kind == "Pod":
            self._pod_priority(cast(Pod, obj))
        if storage.group == "" and storage.kind == "PersistentVolumeClaim":  # the DefaultStorageClass plugin
            classes = self.store.objects(self.resource("storage.k8s.io", "v1", "storageclasses"))
            storageadmission.admit_claim(
                cast(PersistentVolumeClaim, obj), (cast(StorageClass, c.obj()) for c in classes)
            )
        if storage.group == "apiextensions.k8s.io":
            obj["status"] = crds.crd_status(cast(crds.CustomResourceDefinition, obj), self.now())

    def _pod_priority(self, pod: Pod) -> None:
        spec = pod["spec"]
        name = spec.get("priorityClassName")
        if not name:
            return
        found = self.store.get(self.resource("scheduling.k8s.io", "v1", "priorityclasses"), "", name)
        if found is None:
            raise forbidden("pods", pod["metadata"]["name"], f"no PriorityClass with name {name} was found")
        pc = cast(PriorityClass, found.obj())
        spec["priority"] = int(pc.get("value", 0))
        spec["preemptionPolicy"] = pc.get("preemptionPolicy", "PreemptLowerPriority")

    # update and patch -----------------------------------------------------------------------------

    def update(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        validation: FieldValidation = WARN,
        admit: Admit | None = None,
        owner: applying.Owner | None = None,
    ) -> Stored:
        obj = self.check_type(info, body, validation)
        self._check_name(obj, name)
        self._check_namespace(info, obj, namespace)
        storage = self.storage_of(info)
        if admit is not None:
            make = lambda _: copy.deepcopy(obj)  # noqa: E731
            return admitted_write(self, info, namespace, name, make, admit, subresource, dry_run, owner)
        obj = conversion.to_stored(info, storage, obj) if conversion.needs_conversion(info, storage) else obj
        with self.store.lock:
            current = self.get(storage, namespace, name)
            return self._write(info, storage, current, obj, subresource, dry_run, owner)

    def patch(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        content_type: str,
        body: bytes,
        *,
        subresource: str = "",
        dry_run: bool = False,
        validation: FieldValidation = WARN,
        admit: Admit | None = None,
        owner: applying.Owner | None = None,
    ) -> Stored:
        patch_type = content_type.split(";", maxsplit=1)[0].strip().lower()
        if patch_type == APPLY_PATCH:
            request = applying.ApplyRequest(info, namespace, name, body, owner, subresource, dry_run, validation)
            return applying.server_side_apply(self, request, admit)
        if patch_type not in PATCH_TYPES or (patch_type == STRATEGIC_PATCH and not info.strategic_merge):
            accepted = [t for t in PATCH_TYPES if info.strategic_merge or t != STRATEGIC_PATCH]
            raise unsupported_media_type(patch_type, accepted)
        try:
            document = jsoncodec.loads(body)
        except RecursionError:
            raise bad_request("error decoding patch: json: exceeded max depth") from None
        except ValueError as exc:
            raise bad_request(f"error decoding patch: {exc}") from None

        def patched(current: Stored) -> JsonObject:
            found = self._apply_patch(info, patch_type, self.served_obj(info, current), document)
            found = self.check_type(info, found, validation)
            self._check_name(found, name)
            if info.namespaced and found["metadata"].get("namespace", namespace) != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            return found

        return self.write_with(info, namespace, name, patched, subresource, dry_run, admit, owner)

    def write_with(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        patched: Callable[[Stored], JsonObject],
        subresource: str,
        dry_run: bool,
        admit: Admit | None,
        owner: applying.Owner | None,
    ) -> Stored:
        """Store what `patched` makes of the stored object (with the admission webhooks, if any)."""
        if admit is not None:
            return admitted_write(self, info, namespace, name, patched, admit, subresource, dry_run, owner)
        storage = self.storage_of(info)
        with self.store.lock:
            current = self.get(storage, namespace, name)
            obj = patched(current)
            if conversion.needs_conversion(info, storage):
                obj = conversion.to_stored(info, storage, obj)
            return self._write(info, storage, current, obj, subresource, dry_run, owner)

    @staticmethod
    def _apply_patch(info: ResourceInfo, patch_type: str, original: JsonObject, document: Any) -> Any:
        try:
            if patch_type == JSON_PATCH:
                return json_patch(original, document)
            if not isinstance(document, dict):
                raise PatchFormatError("a merge patch must be a JSON object")
            if patch_type == MERGE_PATCH:
                return merge_patch(original, document)
            return strategic_merge(original, document, schema_for(info.kind))
        except PatchFormatError as exc:
            raise bad_request(str(exc)) from None
        except PatchApplyError as exc:
            raise unprocessable(str(exc)) from None

    def _write(
        self,
        info: ResourceInfo,
        storage: ResourceInfo,
        current: Stored,
        obj: JsonObject,
        subresource: str,
        dry_run: bool,
        owner: applying.Owner | None = None,
    ) -> Stored:
        old, new = self.prepare_write(info, storage, current, obj, subresource, owner)
        return self.commit_write(storage, current, old, new, subresource, dry_run)

    def prepare_write(
        self,
        info: ResourceInfo,
        storage: ResourceInfo,
        current: Stored,
        obj: JsonObject,
        subresource: str,
        owner: applying.Owner | None = None,
    ) -> tuple[JsonObject, JsonObject]:
        """(old, new): the object an update would store, checked; the caller holds the lock."""
        old = current.obj()
        self._preconditions(info, current, old, obj)
        new = self._merge_update(storage, old, obj, subresource)
        if not subresource:
            apply_update_defaults(storage.group, storage.kind, new)
        if owner is not None and subresource in ("", "status"):
            if owner.applied:
                applying.keep_applied(new, obj)
            else:
                writer = self.writer(info, storage, owner.manager, owner.subresource or subresource)
                track_update(old, new, writer, self.now())
        self.validate(info, new, old)
        _omit_empty(new["metadata"])
        if storage.tracks_generation and _spec_part(new) != _spec_part(old):
            new["metadata"]["generation"] = int(old["metadata"].get("generation") or 0) + 1
        new["metadata"]["resourceVersion"] = old["metadata"].get("resourceVersion")
        return old, new

    def commit_write(
        self, storage: ResourceInfo, current: Stored, old: JsonObject, new: JsonObject, subresource: str, dry_run: bool
    ) -> Stored:
        """Store what `prepare_write` made (nothing for a no-op or a dry run); the caller holds the lock."""
        if new == old or dry_run:
            return current if new == old else self.store.make(storage, new, current.rv)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            if _graceful_pending(storage, new):
                return self.store.put(storage, new, current)
            return finish_deletion(self, storage, current, new)
        stored = self.store.put(storage, new, current)
        if storage.group == "apiextensions.k8s.io" and not subresource:
            self.register_crd(cast(crds.CustomResourceDefinition, new))
        return stored

    def _preconditions(self, info: ResourceInfo, current: Stored, old: JsonObject, obj: JsonObject) -> None:
        meta = obj["metadata"]
        wanted = meta.get("resourceVersion")
        if wanted not in (None, "") and str(wanted) != str(current.rv):
            raise stale(info.plural, current.name, info.group)
        uid = meta.get("uid")
        if uid and uid != old["metadata"].get("uid"):
            why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old['metadata'].get('uid')}"
            raise conflict(info.plural, current.name, why, info.group)

    @staticmethod
    def _merge_update(storage: ResourceInfo, old: JsonObject, obj: JsonObject, subresource: str) -> JsonObject:
        """The object to store: status-only for /status, status kept for the main resource."""
        if subresource == "status":
            new: JsonObject = jsoncodec.loads(jsoncodec.dumps(old))
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            return new
        if subresource == "finalize":
            new = jsoncodec.loads(jsoncodec.dumps(old))
            new.setdefault("spec", {})["finalizers"] = (obj.get("spec") or {}).get("finalizers") or []
            return new
        new = obj
        if storage.has_status:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        meta = new["metadata"]
        for key in _SYSTEM_META:
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
            else:
                meta.pop(key, None)
        meta.pop("selfLink", None)
        if storage.namespaced:
            meta["namespace"] = old["metadata"].get("namespace")
        added = set(meta.get("finalizers") or []) - set(old["metadata"].get("finalizers") or [])
        if old["metadata"].get("deletionTimestamp") and added:
            raise invalid(
                storage.kind,
                str(meta.get("name")),
                [
                    Cause(
                        "FieldValueForbidden",
                        "Forbidden: no new finalizers can be added if the object is being deleted, "
                        f"found new finalizers {sorted(added)}",
                        "metadata.finalizers",
                    )
                ],
                storage.group,
            )
        return new

    # binding --------------------------------------------------------------------------------------

    def bind(self, namespace: str, name: str | None, body: Any) -> None:
        """`POST pods/{name}/binding` (or `POST bindings`): assign an unbound pod to a node (`binding.py`)."""
        binding.bind(self, namespace, name, body)


def _omit_empty(meta: ObjectMeta) -> None:
    """Drop the lists ObjectMeta declares `omitempty`, as kube's encoding does: an orphaned dependent
    (the garbage collector removed its last owner) has no `ownerReferences`, not `[]`."""
    for key in ("ownerReferences", "finalizers"):
        if key in meta and not meta[key]:
            del meta[key]


def _set_resource_version(value: object) -> bool:
    try:
        return int(str(value or 0)) > 0
    except ValueError:
        return False


def _graceful_pending(storage: ResourceInfo, obj: JsonObject) -> bool:
    """A pod whose graceful deletion a kubelet is carrying out stays until it deletes it."""
    return (
        storage.group == ""
        and storage.kind == "Pod"
        and int(obj["metadata"].get("deletionGracePeriodSeconds") or 0) > 0
    )


def _already_exists(info: ResourceInfo, name: str) -> ApiError:
    return already_exists(info.plural, name, info.group)
