"""The Dynamic Resource Allocation objects of `resource.k8s.io/v1` (Kubernetes 1.34 GA, 1.35 fields),
typed once: DeviceClass, ResourceClaim, ResourceClaimTemplate and ResourceSlice, with the parts the
kit's API server, claim controller, scheduler allocator and DRA kubelet plugin read and write:
requests (`exactly` or `firstAvailable`), CEL selectors, constraints, opaque config, consumable
capacity (KEP-5075: `capacity.requests`, a device's `requestPolicy`, `allowMultipleAllocations`,
a result's `consumedCapacity` and `shareID`) and partitionable devices (KEP-4815: a slice's
`sharedCounters`, a device's `consumesCounters`).

Field names and nesting follow kube's `k8s.io/api/resource/v1` types exactly; older served versions
(v1beta1's flat request fields) are converted to this shape by the API server before anything reads
them. Pure TypedDicts over the decoded JSON (`total=False`: read with `.get`); see `meta.py`.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.core import NodeSelector, Quantity
from runtimekit.kube.objects.meta import Condition, JsonObject, ObjectMeta

DRA_GROUP = "resource.k8s.io"
"""The API group of every kind here."""


# -- DeviceClass ----------------------------------------------------------------------------------


class CELDeviceSelector(TypedDict, total=False):
    expression: str  # a CEL expression over `device` (driver, attributes, capacity, allowMultipleAllocations)


class DeviceSelector(TypedDict, total=False):
    cel: CELDeviceSelector


class OpaqueDeviceConfiguration(TypedDict, total=False):
    driver: str
    parameters: JsonObject  # a runtime.RawExtension: the driver's own object (apiVersion, kind, ...)


class DeviceClassConfiguration(TypedDict, total=False):
    opaque: OpaqueDeviceConfiguration


class DeviceClassSpec(TypedDict, total=False):
    selectors: list[DeviceSelector]
    config: list[DeviceClassConfiguration]
    extendedResourceName: str  # 1.34 alpha: the extended resource a container may request instead of a claim


class DeviceClass(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: DeviceClassSpec


# -- ResourceClaim: requests ----------------------------------------------------------------------


class DeviceToleration(TypedDict, total=False):
    key: str
    operator: str  # Exists or Equal (the default)
    value: str
    effect: str  # NoSchedule or NoExecute; empty matches both
    tolerationSeconds: int


class CapacityRequirements(TypedDict, total=False):
    requests: dict[str, Quantity]  # the capacity name (as in the device's `capacity`) -> the amount to consume


class ExactDeviceRequest(TypedDict, total=False):
    deviceClassName: str
    selectors: list[DeviceSelector]
    allocationMode: str  # ExactCount (the default) or All
    count: int  # with ExactCount; default 1
    adminAccess: bool
    tolerations: list[DeviceToleration]
    capacity: CapacityRequirements


class DeviceSubRequest(TypedDict, total=False):
    """One alternative of `firstAvailable`: an ExactDeviceRequest with a name, without adminAccess."""

    name: str
    deviceClassName: str
    selectors: list[DeviceSelector]
    allocationMode: str
    count: int
    tolerations: list[DeviceToleration]
    capacity: CapacityRequirements


class DeviceRequest(TypedDict, total=False):
    name: str
    exactly: ExactDeviceRequest  # exactly one of `exactly` and `firstAvailable`
    firstAvailable: list[DeviceSubRequest]


class DeviceConstraint(TypedDict, total=False):
    requests: list[str]  # request names (or `<request>/<subrequest>`); empty: all requests of the claim
    matchAttribute: str  # a fully qualified attribute name all chosen devices agree on
    distinctAttribute: str  # 1.34 alpha: all chosen devices differ in this attribute


class DeviceClaimConfiguration(TypedDict, total=False):
    requests: list[str]  # empty: applies to all requests
    opaque: OpaqueDeviceConfiguration


class DeviceClaim(TypedDict, total=False):
    requests: list[DeviceRequest]
    constraints: list[DeviceConstraint]
    config: list[DeviceClaimConfiguration]


class ResourceClaimSpec(TypedDict, total=False):
    devices: DeviceClaim


# -- ResourceClaim: status ------------------------------------------------------------------------


class DeviceRequestAllocationResult(TypedDict, total=False):
    request: str  # the request name, `<request>/<subrequest>` for a firstAvailable alternative
    driver: str
    pool: str
    device: str
    adminAccess: bool
    tolerations: list[DeviceToleration]
    bindingConditions: list[str]
    bindingFailureConditions: list[str]
    shareID: str  # set when the device allows multiple allocations: tells this share from the others
    consumedCapacity: dict[str, Quantity]


class DeviceAllocationConfiguration(TypedDict, total=False):
    source: str  # FromClass or FromClaim
    requests: list[str]
    opaque: OpaqueDeviceConfiguration


class DeviceAllocationResult(TypedDict, total=False):
    results: list[DeviceRequestAllocationResult]
    config: list[DeviceAllocationConfiguration]


class AllocationResult(TypedDict, total=False):
    devices: DeviceAllocationResult
    nodeSelector: NodeSelector  # where the allocated devices are reachable
    allocationTimestamp: str


class ResourceClaimConsumerReference(TypedDict, total=False):
    apiGroup: str  # empty for core (pods)
    resource: str  # "pods"
    name: str
    uid: str


class NetworkDeviceData(TypedDict, total=False):
    interfaceName: str
    ips: list[str]
    hardwareAddress: str


class AllocatedDeviceStatus(TypedDict, total=False):
    driver: str
    pool: str
    device: str
    shareID: str
    conditions: list[Condition]
    data: JsonObject
    networkData: NetworkDeviceData


class ResourceClaimStatus(TypedDict, total=False):
    allocation: AllocationResult
    reservedFor: list[ResourceClaimConsumerReference]  # at most 256 consumers
    devices: list[AllocatedDeviceStatus]  # written by the driver


class ResourceClaim(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ResourceClaimSpec
    status: ResourceClaimStatus


class ResourceClaimTemplateSpec(TypedDict, total=False):
    metadata: ObjectMeta  # labels and annotations copied onto each claim made from the template
    spec: ResourceClaimSpec


class ResourceClaimTemplate(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ResourceClaimTemplateSpec


# -- ResourceSlice --------------------------------------------------------------------------------


class ResourcePool(TypedDict, total=False):
    name: str
    generation: int  # slices of an older generation than the newest seen are ignored
    resourceSliceCount: int  # how many slices the pool has in this generation


class DeviceAttribute(TypedDict, total=False):
    """Exactly one of the four."""

    int: int
    bool: bool
    string: str
    version: str  # semantic version 2.0.0


class CapacityRequestPolicyRange(TypedDict, total=False):
    min: Quantity
    max: Quantity
    step: Quantity


class CapacityRequestPolicy(TypedDict, total=False):
    default: Quantity  # consumed when a request names no amount of this capacity
    validValues: list[Quantity]  # a request is rounded up to the next valid value
    validRange: CapacityRequestPolicyRange  # a request is rounded up to min + n*step


class DeviceCapacity(TypedDict, total=False):
    value: Quantity
    requestPolicy: CapacityRequestPolicy  # only with allowMultipleAllocations


class Counter(TypedDict, total=False):
    value: Quantity


class CounterSet(TypedDict, total=False):
    name: str
    counters: dict[str, Counter]


class DeviceCounterConsumption(TypedDict, total=False):
    counterSet: str  # the name of a CounterSet in the slice's (1.35: the pool's) sharedCounters
    counters: dict[str, Counter]


class DeviceTaint(TypedDict, total=False):
    key: str
    value: str
    effect: str  # NoSchedule or NoExecute
    timeAdded: str


class Device(TypedDict, total=False):
    name: str
    attributes: dict[str, DeviceAttribute]  # qualified name (`domain/id`, or `id` in the driver's domain)
    capacity: dict[str, DeviceCapacity]
    consumesCounters: list[DeviceCounterConsumption]
    nodeName: str  # with the slice's perDeviceNodeSelection
    nodeSelector: NodeSelector
    allNodes: bool
    taints: list[DeviceTaint]
    bindsToNode: bool
    bindingConditions: list[str]
    bindingFailureConditions: list[str]
    allowMultipleAllocations: bool  # KEP-5075: several claims may share the device, each consuming capacity


class ResourceSliceSpec(TypedDict, total=False):
    driver: str
    pool: ResourcePool
    nodeName: str  # exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection
    nodeSelector: NodeSelector
    allNodes: bool
    perDeviceNodeSelection: bool
    devices: list[Device]
    sharedCounters: list[CounterSet]  # KEP-4815: counters the devices' consumesCounters draw from


class ResourceSlice(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ResourceSliceSpec
