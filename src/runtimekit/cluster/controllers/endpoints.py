"""The Endpoints and EndpointSlice controllers, as kube's: a Service with a selector gets the
addresses of the pods it selects.

Per Service (`namespace/name`), level-based:
- the pods of its namespace its `spec.selector` matches, that have an IP and have not ended, give
  one address each: ready pods (or every pod, with `publishNotReadyAddresses`) under `addresses`,
  the others under `notReadyAddresses`; each Service port resolves its `targetPort` per pod (a
  number, or the name of a container port: a pod without that port is left out of it);
- the Endpoints object of the same name holds them in subsets (pods that resolve to the same ports
  share one, addresses sorted by IP), labelled as the Service (and `service.kubernetes.io/headless`
  for a headless one); with no address it has no `subsets`;
- EndpointSlices (`discovery.k8s.io/v1`, `<service>-xxxxx`, labelled `kubernetes.io/service-name`
  and managed-by `endpointslice-controller.k8s.io`, owned by the Service) hold the same endpoints,
  one slice per set of resolved ports, each endpoint with `ready`/`serving`/`terminating`;
- a Service without a selector is left alone (its Endpoints are the user's); a deleted Service's
  Endpoints are deleted (its slices go with it through the garbage collector).
Kube splits slices at 100 endpoints and handles dual-stack; here one slice holds a port set's all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar, cast

from runtimekit.cluster.controllers.base import Controller, path_of
from runtimekit.cluster.controllers.pods import is_ready, is_terminating, owner_ref, phase
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informers import Change, Informers, ObjectCache
from runtimekit.kube.objects import (
    Endpoint,
    EndpointAddress,
    EndpointPort,
    Endpoints,
    EndpointSlice,
    EndpointSubset,
    Pod,
    Service,
    ServicePort,
    labels_of,
    meta,
    object_key,
)
from runtimekit.kube.semantics.labels import label_selector_or_nothing

T = TypeVar("T", Endpoints, EndpointSlice)
SERVICES_PATH = "/api/v1/services"
PODS_PATH = "/api/v1/pods"
ENDPOINTS_PATH = "/api/v1/endpoints"
SLICES_PATH = "/apis/discovery.k8s.io/v1/endpointslices"
SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SLICE_CONTROLLER = "endpointslice-controller.k8s.io"
HEADLESS = "service.kubernetes.io/headless"
Ports = tuple[tuple[str, int, str], ...]  # (name, port, protocol) per Service port


def _selector(service: Service) -> Mapping[str, str] | None:
    return (service.get("spec") or {}).get("selector") or None


def _target(port: ServicePort, pod: Pod) -> int | None:
    """The pod port a Service port sends to: its number, or the container port of that name."""
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == target and declared.get("protocol", "TCP") == port.get("protocol", "TCP"):
                return int(declared.get("containerPort", 0))
    return None


def pod_ports(service: Service, pod: Pod) -> Ports:
    resolved = []
    for port in (service.get("spec") or {}).get("ports") or []:
        target = _target(port, pod)
        if target is not None:
            resolved.append((str(port.get("name") or ""), target, str(port.get("protocol") or "TCP")))
    return tuple(resolved)


def selected_pods(service: Service, pods: Sequence[Pod]) -> list[Pod]:
    selector = _selector(service)
    if selector is None:
        return []
    selects = label_selector_or_nothing({"matchLabels": dict(selector)})
    return [
        p
        for p in pods
        if selects.matches(labels_of(p))
        and (p.get("status") or {}).get("podIP")
        and phase(p) not in ("Succeeded", "Failed")
    ]


def _address(pod: Pod) -> EndpointAddress:
    m = meta(pod)
    address: EndpointAddress = {"ip": str((pod.get("status") or {}).get("podIP"))}
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        address["nodeName"] = node
    address["targetRef"] = {
        "kind": "Pod",
        "namespace": m.get("namespace", ""),
        "name": str(m.get("name", "")),
        "uid": str(m.get("uid", "")),
    }
    return address


def _counts_ready(service: Service, pod: Pod) -> bool:
    if (service.get("spec") or {}).get("publishNotReadyAddresses"):
        return True
    return is_ready(pod) and not is_terminating(pod)


def by_ports(service: Service, pods: Sequence[Pod]) -> dict[Ports, list[Pod]]:
    groups: dict[Ports, list[Pod]] = {}
    for pod in selected_pods(service, pods):
        ports = pod_ports(service, pod)
        if ports or not (service.get("spec") or {}).get("ports"):
            groups.setdefault(ports, []).append(pod)
    return groups


def _ip(pod: Pod) -> tuple[int, ...] | str:
    text = str((pod.get("status") or {}).get("podIP"))
    parts = text.split(".")
    return tuple(int(p) for p in parts) if len(parts) == 4 and all(p.isdigit() for p in parts) else text


def endpoint_subsets(service: Service, pods: Sequence[Pod]) -> list[EndpointSubset]:
    """The `subsets` of the Service's Endpoints (kube's repacked form)."""
    subsets = []
    for ports, group in sorted(by_ports(service, pods).items()):
        ready = sorted((p for p in group if _counts_ready(service, p)), key=_ip)
        waiting = sorted((p for p in group if not _counts_ready(service, p)), key=_ip)
        subset: EndpointSubset = {}
        if ready:
            subset["addresses"] = [_address(p) for p in ready]
        if waiting:
            subset["notReadyAddresses"] = [_address(p) for p in waiting]
        if ports:
            subset["ports"] = [_endpoint_port(n, p, proto) for n, p, proto in ports]
        subsets.append(subset)
    return subsets


def _endpoint_port(name: str, port: int, protocol: str) -> EndpointPort:
    out: EndpointPort = {"port": port, "protocol": protocol}
    if name:
        out["name"] = name
    return out


def slice_endpoints(service: Service, pods: Sequence[Pod]) -> list[Endpoint]:
    out = []
    for pod in sorted(pods, key=_ip):
        ready = _counts_ready(service, pod)
        address = _address(pod)
        endpoint: Endpoint = {
            "addresses": [address["ip"]],
            "conditions": {
                "ready": ready,
                "serving": is_ready(pod) or ready,
                "terminating": is_terminating(pod),
            },
            "targetRef": address["targetRef"],
        }
        if "nodeName" in address:
            endpoint["nodeName"] = address["nodeName"]
        out.append(endpoint)
    return out


def _labels(service: Service) -> dict[str, str]:
    labels = dict(labels_of(service))
    if (service.get("spec") or {}).get("clusterIP") == "None":
        labels[HEADLESS] = ""
    return labels


class EndpointsController(Controller):
    """See the module docstring: Endpoints and EndpointSlices of every selecting Service."""

    name = "endpoint-controller"

    def __init__(self, http: KubeHttp, informers: Informers) -> None:
        super().__init__(http, informers)
        self.services = self.watch(SERVICES_PATH, Service, self._on_service).cache
        self.pods = self.watch(PODS_PATH, Pod, self._on_pod).cache
        self.endpoints = self.watch(ENDPOINTS_PATH, Endpoints, self._on_endpoints).cache
        self.slices = self.watch(SLICES_PATH, EndpointSlice, self._on_slice).cache

    def _on_service(self, change: Change[Service]) -> None:
        self.queue.add(object_key(change.obj))

    def _on_endpoints(self, change: Change[Endpoints]) -> None:
        self.queue.add(object_key(change.obj))  # a hand edit of a managed object is put back

    def _on_slice(self, change: Change[EndpointSlice]) -> None:
        service = labels_of(change.obj).get(SERVICE_NAME)
        if service:
            self.queue.add(f"{meta(change.obj).get('namespace', '')}/{service}")

    def _on_pod(self, change: Change[Pod]) -> None:
        for pod in (change.old, change.new):
            if pod is None:
                continue
            namespace = str(meta(pod).get("namespace", ""))
            for service in self.services.items(namespace):
                selector = _selector(service)
                if selector is not None and all(labels_of(pod).get(k) == v for k, v in selector.items()):
                    self.queue.add(object_key(service))

    def sync(self, key: str) -> None:
        service = self.services.get(key)
        if service is None:
            gone = self.endpoints.get(key)
            if gone is not None:
                self.delete(gone, "v1", "endpoints", self.endpoints)
            return
        if _selector(service) is None or is_terminating(service):
            return
        namespace = str(meta(service).get("namespace", ""))
        pods = self.pods.items(namespace)
        self._sync_endpoints(service, endpoint_subsets(service, pods))
        self._sync_slices(service, by_ports(service, pods))

    def _sync_endpoints(self, service: Service, subsets: list[EndpointSubset]) -> None:
        m = meta(service)
        body: Endpoints = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": str(m.get("name", "")),
                "namespace": m.get("namespace", ""),
                "labels": _labels(service),
            },
        }
        if subsets:
            body["subsets"] = subsets
        current = self.endpoints.get(object_key(service))
        if current is None:
            self.create("v1", "endpoints", body, self.endpoints)
            return
        if current.get("subsets") == body.get("subsets") and (meta(current).get("labels") or {}) == _labels(service):
            return
        updated: Endpoints = {**current, "metadata": {**meta(current), "labels": _labels(service)}}
        updated.pop("subsets", None)
        if subsets:
            updated["subsets"] = subsets
        self._replace("v1", "endpoints", updated, self.endpoints)

    def _replace(self, api_version: str, plural: str, obj: T, cache: ObjectCache[T]) -> None:
        """PUT the object (conditional on the version we saw: a 409 makes the sync retry)."""
        cache.written(cast(T, self.http.put(path_of(api_version, plural, obj), obj)))

    def _sync_slices(self, service: Service, groups: dict[Ports, list[Pod]]) -> None:
        m = meta(service)
        namespace, name = str(m.get("namespace", "")), str(m.get("name", ""))
        owned = [
            s
            for s in self.slices.items(namespace)
            if labels_of(s).get(SERVICE_NAME) == name and labels_of(s).get(MANAGED_BY) == SLICE_CONTROLLER
        ]
        labels = {**_labels(service), SERVICE_NAME: name, MANAGED_BY: SLICE_CONTROLLER}
        wanted = groups or {(): []}  # a Service with no endpoints still has one empty slice, as in kube
        spare = list(owned)
        for ports, pods in sorted(wanted.items()):
            endpoints = slice_endpoints(service, pods)
            slice_ports: list[EndpointPort] = [{"name": n, "port": p, "protocol": proto} for n, p, proto in ports]
            match = next((s for s in spare if _slice_ports(s) == ports), spare[0] if spare else None)
            if match is None:
                new: EndpointSlice = {
                    "apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSlice",
                    "metadata": {
                        "generateName": f"{name}-",
                        "namespace": namespace,
                        "labels": labels,
                        "ownerReferences": [owner_ref(service, "v1", "Service")],
                    },
                    "addressType": "IPv4",
                    "endpoints": endpoints,
                    "ports": slice_ports,
                }
                self.create("discovery.k8s.io/v1", "endpointslices", new, self.slices)
                continue
            spare.remove(match)
            if (match.get("endpoints"), match.get("ports"), labels_of(match)) == (endpoints, slice_ports, labels):
                continue
            updated: EndpointSlice = {**match, "endpoints": endpoints, "ports": slice_ports}
            updated["metadata"] = {**meta(match), "labels": labels}
            self._replace("discovery.k8s.io/v1", "endpointslices", updated, self.slices)
        for extra in spare:
            try:
                self.delete(extra, "discovery.k8s.io/v1", "endpointslices", self.slices)
            except KubeError as exc:
                if exc.code != 409:
                    raise


def _slice_ports(slice_: EndpointSlice) -> Ports:
    return tuple(
        (str(p.get("name") or ""), int(p.get("port") or 0), str(p.get("protocol") or "TCP"))
        for p in slice_.get("ports") or []
    )
