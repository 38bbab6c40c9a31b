"""Services and their endpoints as the kit reads and writes them: core/v1 Service and Endpoints,
discovery.k8s.io/v1 EndpointSlice (the embedded cluster's endpoints controller keeps the latter two).
Pure TypedDicts; see `meta.py`.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.meta import ObjectMeta, ObjectReference


class ServicePort(TypedDict, total=False):
    name: str
    protocol: str
    port: int
    targetPort: int | str  # a number, or the name of a container port
    nodePort: int
    appProtocol: str


class ServiceSpec(TypedDict, total=False):
    type: str  # ClusterIP, NodePort, LoadBalancer, ExternalName
    selector: dict[str, str]
    ports: list[ServicePort]
    clusterIP: str  # "None": headless
    clusterIPs: list[str]
    publishNotReadyAddresses: bool
    sessionAffinity: str
    externalIPs: list[str]


class Service(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ServiceSpec


class EndpointAddress(TypedDict, total=False):
    ip: str
    hostname: str
    nodeName: str
    targetRef: ObjectReference


class EndpointPort(TypedDict, total=False):
    name: str
    port: int
    protocol: str
    appProtocol: str


class EndpointSubset(TypedDict, total=False):
    addresses: list[EndpointAddress]
    notReadyAddresses: list[EndpointAddress]
    ports: list[EndpointPort]


class Endpoints(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    subsets: list[EndpointSubset]


class EndpointConditions(TypedDict, total=False):
    ready: bool
    serving: bool
    terminating: bool


class Endpoint(TypedDict, total=False):
    addresses: list[str]
    conditions: EndpointConditions
    nodeName: str
    targetRef: ObjectReference


class EndpointSlice(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    addressType: str  # IPv4, IPv6, FQDN
    endpoints: list[Endpoint]
    ports: list[EndpointPort]
