"""`pods/binding`: assigning an unbound pod to a node, as kube-apiserver's binding REST does.

The Binding names the pod (its `metadata`, with an optional UID precondition) and the node
(`target`); its annotations are copied onto the pod (the scheduler's assignment travels this way),
the pod gets `spec.nodeName` and the condition `PodScheduled=True`. A pod that is being deleted, is
already assigned, or still has scheduling gates is a 409 Conflict. Called by `operations.Api.bind`;
it works on what `BindingApi` names and imports nothing of `operations`.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from runtimekit.cluster.apiserver import validation
from runtimekit.cluster.apiserver.errors import bad_request, conflict, invalid
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.cluster.apiserver.store import Store, Stored
from runtimekit.kube.objects import Binding, Condition, JsonObject, Pod


class BindingApi(Protocol):
    """What binding reads and writes of the API (`operations.Api`)."""

    store: Store

    def resource(self, group: str, version: str, plural: str) -> ResourceInfo: ...

    def check_type(self, info: ResourceInfo, body: Any) -> JsonObject: ...

    def get(self, info: ResourceInfo, namespace: str, name: str) -> Stored: ...

    def now(self) -> str: ...


def bind(api: BindingApi, namespace: str, name: str | None, body: Any) -> None:
    """`POST pods/{name}/binding` (or `POST bindings`): assign an unbound pod to a node."""
    binding_info = api.resource("", "v1", "bindings")
    binding = cast(Binding, api.check_type(binding_info, body))
    meta = binding["metadata"]
    if name is not None and meta.get("name") != name:
        raise bad_request("name in URL does not match name in Binding object")
    name = str(meta.get("name") or "")
    causes = validation.check_binding(binding)
    if causes:
        raise invalid("Binding", name, causes)
    pods = api.resource("", "v1", "pods")
    with api.store.lock:
        current = api.get(pods, namespace, name)
        pod = cast(Pod, current.obj())
        _check_bindable(pod, name, meta.get("uid"))
        pod["spec"]["nodeName"] = binding["target"]["name"]
        annotations = meta.get("annotations") or {}
        if annotations:
            pod["metadata"].setdefault("annotations", {}).update(annotations)
        _set_condition(pod, "PodScheduled", "True", api.now())
        api.store.put(pods, cast(JsonObject, pod), current)


def _check_bindable(pod: Pod, name: str, uid: object) -> None:
    if uid and uid != pod["metadata"].get("uid"):
        why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pod['metadata'].get('uid')}"
        raise conflict("pods/binding", name, why)
    if pod["metadata"].get("deletionTimestamp"):
        raise conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
    node = pod.get("spec", {}).get("nodeName")
    if node:
        raise conflict("pods/binding", name, f'pod {name} is already assigned to node "{node}"')
    if pod.get("spec", {}).get("schedulingGates"):
        raise conflict("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")


def _set_condition(pod: Pod, kind: str, status: str, now: str) -> None:
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    for condition in conditions:
        if condition.get("type") == kind:
            if condition.get("status") != status:
                condition["lastTransitionTime"] = now
            condition["status"] = status
            return
    added = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
    conditions.append(cast(Condition, added))  # kube writes lastProbeTime as null, which Condition does not type
