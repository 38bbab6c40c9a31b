"""The core/v1 objects the kit reads and writes, typed once: Pod (spec, containers, status),
Node (spec, taints, status), the scheduling terms they carry (tolerations, node and pod affinity,
topology spread), Binding, Event, Namespace and ConfigMap. Fields the kit never reads are left out; a value
typed here may still lack any field (`total=False`), and code reads them with `.get`.

Pure TypedDicts over the decoded JSON; see `meta.py` for the shared parts.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.meta import (
    Condition,
    JsonObject,
    LabelSelector,
    ObjectMeta,
    ObjectReference,
)

Quantity = str | int | float
"""A resource amount as the API serves it (`"500m"`, `"2Gi"`) or as a manifest may write it (`2`)."""
ResourceList = dict[str, Quantity]


class ResourceRequirements(TypedDict, total=False):
    requests: ResourceList
    limits: ResourceList
    claims: list[JsonObject]


class EnvVar(TypedDict, total=False):
    name: str
    value: str
    valueFrom: JsonObject


class ContainerPort(TypedDict, total=False):
    name: str
    containerPort: int
    hostPort: int
    hostIP: str
    protocol: str


class VolumeMount(TypedDict, total=False):
    name: str
    mountPath: str
    subPath: str
    readOnly: bool


class SecurityContext(TypedDict, total=False):
    """A container's security context: what the kit reads of it."""

    privileged: bool
    runAsUser: int
    runAsNonRoot: bool


class Container(TypedDict, total=False):
    name: str
    image: str
    command: list[str]
    args: list[str]
    env: list[EnvVar]
    ports: list[ContainerPort]
    resources: ResourceRequirements
    volumeMounts: list[VolumeMount]
    restartPolicy: str  # "Always" on an init container: a sidecar
    imagePullPolicy: str  # Always, IfNotPresent, Never
    terminationMessagePath: str
    terminationMessagePolicy: str
    securityContext: SecurityContext


class Toleration(TypedDict, total=False):
    key: str
    operator: str  # Exists, Equal (or empty)
    value: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute (or empty: all)
    tolerationSeconds: int


class Taint(TypedDict, total=False):
    key: str
    value: str
    effect: str
    timeAdded: str


class NodeSelectorRequirement(TypedDict, total=False):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: list[str]


class NodeSelectorTerm(TypedDict, total=False):
    matchExpressions: list[NodeSelectorRequirement]
    matchFields: list[NodeSelectorRequirement]


class NodeSelector(TypedDict, total=False):
    nodeSelectorTerms: list[NodeSelectorTerm]


class PreferredSchedulingTerm(TypedDict, total=False):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(TypedDict, total=False):
    requiredDuringSchedulingIgnoredDuringExecution: NodeSelector
    preferredDuringSchedulingIgnoredDuringExecution: list[PreferredSchedulingTerm]


class PodAffinityTerm(TypedDict, total=False):
    labelSelector: LabelSelector
    namespaceSelector: LabelSelector
    namespaces: list[str]
    topologyKey: str
    matchLabelKeys: list[str]
    mismatchLabelKeys: list[str]


class WeightedPodAffinityTerm(TypedDict, total=False):
    weight: int
    podAffinityTerm: PodAffinityTerm


class PodAffinity(TypedDict, total=False):
    """`podAffinity` and `podAntiAffinity` alike."""

    requiredDuringSchedulingIgnoredDuringExecution: list[PodAffinityTerm]
    preferredDuringSchedulingIgnoredDuringExecution: list[WeightedPodAffinityTerm]


class Affinity(TypedDict, total=False):
    nodeAffinity: NodeAffinity
    podAffinity: PodAffinity
    podAntiAffinity: PodAffinity


class TopologySpreadConstraint(TypedDict, total=False):
    maxSkew: int
    topologyKey: str
    whenUnsatisfiable: str  # DoNotSchedule, ScheduleAnyway
    labelSelector: LabelSelector
    minDomains: int
    nodeAffinityPolicy: str  # Honor, Ignore
    nodeTaintsPolicy: str
    matchLabelKeys: list[str]


class Volume(TypedDict, total=False):
    name: str
    persistentVolumeClaim: JsonObject
    configMap: JsonObject
    secret: JsonObject
    hostPath: JsonObject
    emptyDir: JsonObject
    projected: JsonObject
    ephemeral: JsonObject  # a generic ephemeral volume: a PVC `<pod>-<volume>` made for the pod
    csi: JsonObject  # an inline CSI volume
    # in-tree disks the scheduler's volume filters read (same-disk conflicts, CSI migration)
    gcePersistentDisk: JsonObject
    awsElasticBlockStore: JsonObject
    azureDisk: JsonObject
    cinder: JsonObject
    rbd: JsonObject
    iscsi: JsonObject


class PodResourceClaim(TypedDict, total=False):
    """An entry of `spec.resourceClaims`: a ResourceClaim by name, or a template to make one from."""

    name: str  # what containers' `resources.claims[].name` refer to
    resourceClaimName: str
    resourceClaimTemplateName: str


class PodResourceClaimStatus(TypedDict, total=False):
    """An entry of `status.resourceClaimStatuses`: the claim the template controller made for the pod."""

    name: str
    resourceClaimName: str


class PodSpec(TypedDict, total=False):
    nodeName: str
    schedulerName: str
    priority: int
    priorityClassName: str
    preemptionPolicy: str
    nodeSelector: dict[str, str]
    affinity: Affinity
    tolerations: list[Toleration]
    topologySpreadConstraints: list[TopologySpreadConstraint]
    containers: list[Container]
    initContainers: list[Container]
    overhead: ResourceList
    volumes: list[Volume]
    restartPolicy: str
    dnsPolicy: str
    securityContext: JsonObject
    enableServiceLinks: bool
    hostNetwork: bool
    hostname: str
    subdomain: str
    serviceAccountName: str
    serviceAccount: str  # deprecated alias of serviceAccountName, still written by the API server
    terminationGracePeriodSeconds: int
    activeDeadlineSeconds: int
    runtimeClassName: str
    schedulingGates: list[JsonObject]
    resourceClaims: list[PodResourceClaim]


class ResourceHealth(TypedDict, total=False):
    """One device of a ResourceStatus (KEP-4680): its ID and `Healthy`, `Unhealthy` or `Unknown`."""

    resourceID: str
    health: str
    message: str


class ResourceStatus(TypedDict, total=False):
    """An entry of `allocatedResourcesStatus`: a resource name, or `claim:<claim>[/<request>]` for DRA."""

    name: str
    resources: list[ResourceHealth]


class ContainerStatus(TypedDict, total=False):
    name: str
    image: str
    imageID: str
    containerID: str
    ready: bool
    started: bool
    restartCount: int
    state: JsonObject  # one of waiting, running, terminated
    lastState: JsonObject
    allocatedResourcesStatus: list[ResourceStatus]


class PodIP(TypedDict, total=False):
    """An entry of `podIPs` (and of `hostIPs`: a HostIP has the same one field)."""

    ip: str


class PodStatus(TypedDict, total=False):
    phase: str  # Pending, Running, Succeeded, Failed, Unknown
    conditions: list[Condition]
    containerStatuses: list[ContainerStatus]
    initContainerStatuses: list[ContainerStatus]
    ephemeralContainerStatuses: list[ContainerStatus]
    hostIP: str
    hostIPs: list[PodIP]
    podIP: str
    podIPs: list[PodIP]
    startTime: str
    nominatedNodeName: str
    qosClass: str
    reason: str
    message: str
    resourceClaimStatuses: list[PodResourceClaimStatus]


class Pod(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus


class PodTemplateSpec(TypedDict, total=False):
    metadata: ObjectMeta
    spec: PodSpec


class NodeSpec(TypedDict, total=False):
    unschedulable: bool
    taints: list[Taint]
    podCIDR: str
    providerID: str


class NodeAddress(TypedDict, total=False):
    type: str
    address: str


class NodeStatus(TypedDict, total=False):
    capacity: ResourceList
    allocatable: ResourceList
    conditions: list[Condition]
    addresses: list[NodeAddress]
    daemonEndpoints: JsonObject
    nodeInfo: dict[str, str]
    images: list[JsonObject]


class Node(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: NodeSpec
    status: NodeStatus


class Binding(TypedDict, total=False):
    """`pods/binding`: the pod named by `metadata` goes to the node `target` names."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    target: ObjectReference


class EventSource(TypedDict, total=False):
    component: str
    host: str


class Event(TypedDict, total=False):
    """A core/v1 Event (events.k8s.io/v1 writes `regarding`, `note` and `reportingController`)."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    involvedObject: ObjectReference
    regarding: ObjectReference
    reason: str
    message: str
    note: str
    type: str  # Normal, Warning
    action: str
    count: int
    firstTimestamp: str
    lastTimestamp: str
    eventTime: str
    source: EventSource
    reportingComponent: str
    reportingController: str
    reportingInstance: str
    series: JsonObject


class ConfigMap(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    data: dict[str, str]
    binaryData: dict[str, str]


class Namespace(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JsonObject
    status: JsonObject
