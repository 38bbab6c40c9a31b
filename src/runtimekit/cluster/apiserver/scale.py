"""The `scale` subresource of Deployments, ReplicaSets and StatefulSets (`autoscaling/v1` Scale).

`GET .../<name>/scale` answers a Scale made from the object (`spec.replicas`; `status.replicas` and
the selector in its text form); `PUT` takes a Scale (its `metadata.resourceVersion`, when given, is a
precondition) and `PATCH` a merge, JSON or strategic patch of the Scale; both change only the
object's `spec.replicas` (so `generation` counts it) and answer the new Scale. This is what
`kubectl scale` (a merge patch `{"spec":{"replicas":N}}`, or GET then PUT with `--current-replicas`
or `--resource-version`) and autoscalers use. Called by the HTTP handlers.
"""

from __future__ import annotations

from typing import Any

from runtimekit.cluster.apiserver.applying import Owner
from runtimekit.cluster.apiserver.errors import (
    bad_request,
    field_invalid,
    invalid,
    stale,
    unprocessable,
    unsupported_media_type,
)
from runtimekit.cluster.apiserver.operations import JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, Api
from runtimekit.cluster.apiserver.patch import PatchApplyError, PatchFormatError, json_patch, merge_patch
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.cluster.apiserver.store import Stored
from runtimekit.kube import jsoncodec
from runtimekit.kube.objects import JsonObject
from runtimekit.kube.semantics.labels import label_selector_or_nothing
from runtimekit.kube.semantics.labeltext import to_string


def scale_of(stored: Stored) -> JsonObject:
    """The Scale view of a stored workload."""
    obj = stored.obj()
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": str(stored.rv),
            "creationTimestamp": meta.get("creationTimestamp"),
        },
        "spec": {"replicas": int(spec.get("replicas", 1))},
        "status": {
            "replicas": int(status.get("replicas") or 0),
            "selector": to_string(label_selector_or_nothing(spec.get("selector"))),
        },
    }


def _replicas(scale: Any, name: str) -> int:
    if not isinstance(scale, dict):
        raise bad_request("the object provided is unrecognized (must be of type Scale)")
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        cause = field_invalid("spec.replicas", replicas, "must be greater than or equal to 0")
        raise invalid("Scale", name, [cause], "autoscaling")
    return replicas


def _set_replicas(
    api: Api, info: ResourceInfo, current: Stored, replicas: int, dry_run: bool, manager: str | None
) -> JsonObject:
    obj = current.obj()
    obj.setdefault("spec", {})["replicas"] = replicas
    obj["metadata"]["resourceVersion"] = str(current.rv)
    namespace = obj["metadata"].get("namespace", "")
    owner = Owner(manager, subresource="scale") if manager is not None else None  # kube's entry names /scale
    stored = api.update(info, namespace, current.name, obj, dry_run=dry_run, owner=owner)
    return scale_of(stored)


def get_scale(api: Api, info: ResourceInfo, namespace: str, name: str) -> JsonObject:
    return scale_of(api.get(api.storage_of(info), namespace, name))


def update_scale(
    api: Api, info: ResourceInfo, namespace: str, name: str, body: Any, dry_run: bool, manager: str | None = None
) -> JsonObject:
    """PUT: the Scale's replicas, with its resourceVersion as a precondition when it has one."""
    replicas = _replicas(body, name)
    wanted = str((body.get("metadata") or {}).get("resourceVersion") or "")
    with api.store.lock:
        current = api.get(api.storage_of(info), namespace, name)
        if wanted and wanted != str(current.rv):
            raise stale(info.plural, name, info.group)
        return _set_replicas(api, info, current, replicas, dry_run, manager)


def patch_scale(
    api: Api,
    info: ResourceInfo,
    namespace: str,
    name: str,
    content_type: str,
    body: bytes,
    dry_run: bool,
    manager: str | None = None,
) -> JsonObject:
    """PATCH: a merge, strategic (same as merge for a Scale) or JSON patch of the Scale."""
    kind = content_type.split(";", maxsplit=1)[0].strip().lower()
    if kind not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH):
        raise unsupported_media_type(kind, [JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH])
    try:
        document = jsoncodec.loads(body)
    except ValueError as exc:
        raise bad_request(f"error decoding patch: {exc}") from None
    with api.store.lock:
        current = api.get(api.storage_of(info), namespace, name)
        scale = scale_of(current)
        try:
            if kind == JSON_PATCH:
                patched = json_patch(scale, document)
            elif isinstance(document, dict):
                patched = merge_patch(scale, document)
            else:
                raise PatchFormatError("a merge patch must be a JSON object")
        except PatchFormatError as exc:
            raise bad_request(str(exc)) from None
        except PatchApplyError as exc:
            raise unprocessable(str(exc)) from None
        wanted = str(((patched if isinstance(patched, dict) else {}).get("metadata") or {}).get("resourceVersion"))
        if wanted != str(current.rv):  # a resourceVersion in the patch is a precondition
            raise stale(info.plural, name, info.group)
        return _set_replicas(api, info, current, _replicas(patched, name), dry_run, manager)
