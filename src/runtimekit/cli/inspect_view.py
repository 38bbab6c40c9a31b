"""What `runtimekit inspect` shows, computed from the cluster's Nodes and Pods: per node and per GPU
the shares granted, the pods holding them, MIG instances, the room left and health.

Pure: `build_view` takes the objects as the API server lists them and returns frozen values that
`inspect_render` prints and `inspect_usage` fills with what the nodes' exporters measure. A pod's
GPUs are read only from an assignment the scheduler itself would book: the same node parsing
(`scheduler.cache.objects.node_state`) and the same judge (`scheduler.cache.authority`: readable,
for this node, signed when `verifier` is given, and exactly what the containers ask for); an
assignment that fails is listed with the judge's reason instead of counted. Called by
`runtimekit.cli.inspect_cmd`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from runtimekit.base.keyring import KeyRing, key_id_of
from runtimekit.kube.objects import Node, Pod, meta
from runtimekit.model import Assignment, GpuShare, RequestError
from runtimekit.model.authority import signature_problem
from runtimekit.model.gpu import Gpu
from runtimekit.model.request import MILLI_PER_GPU, parse_pod_request
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.cache.authority import VERIFIED, AssignmentAuthority, Seal
from runtimekit.scheduler.cache.objects import NodeState, is_terminated, node_state

MIB = 1024 * 1024


@dataclass(frozen=True)
class PodShare:
    """One container's share of one GPU (or of a MIG instance on it)."""

    namespace: str
    pod: str
    container: str
    core_milli: int
    memory_mib: int
    mig_profile: str = ""
    mig_uuid: str = ""
    claim: str = ""  # the DRA ResourceClaim the share is held through ("": a device-plugin assignment)


@dataclass(frozen=True)
class MigView:
    """A MIG instance on a GPU: one the node lists, or one an assignment holds (dynamic MIG creates
    it at allocation); `pod` is "namespace/name" of its holder, "" when free."""

    profile: str
    start: int
    uuid: str
    pod: str = ""


@dataclass(frozen=True)
class GpuView:
    index: int
    uuid: str
    model: str
    memory_mib: int
    healthy: bool
    mig_mode: str
    shares: tuple[PodShare, ...] = ()
    mig: tuple[MigView, ...] = ()

    @property
    def core_granted_milli(self) -> int:
        return sum(s.core_milli for s in self.shares)

    @property
    def memory_granted_mib(self) -> int:
        return sum(s.memory_mib for s in self.shares)

    @property
    def core_free_milli(self) -> int:
        return max(MILLI_PER_GPU - self.core_granted_milli, 0) if self.mig_mode == "off" else 0

    @property
    def memory_free_mib(self) -> int:
        return max(self.memory_mib - self.memory_granted_mib, 0)


@dataclass(frozen=True)
class Ignored:
    """A bound pod whose assignment the scheduler would not book (so none of its GPUs is counted)."""

    namespace: str
    pod: str
    reason: str
    message: str


@dataclass(frozen=True)
class NodeView:
    name: str
    address: str
    ready: bool
    gpus: tuple[GpuView, ...] = ()
    ignored: tuple[Ignored, ...] = ()
    problem: str = ""  # why the node's GPU inventory could not be read

    @property
    def memory_mib(self) -> int:
        return sum(g.memory_mib for g in self.gpus)

    @property
    def memory_granted_mib(self) -> int:
        return sum(g.memory_granted_mib for g in self.gpus)

    @property
    def core_granted_milli(self) -> int:
        return sum(g.core_granted_milli for g in self.gpus)


@dataclass(frozen=True)
class ClusterView:
    nodes: tuple[NodeView, ...]
    signatures_checked: bool
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def memory_mib(self) -> int:
        return sum(n.memory_mib for n in self.nodes)

    @property
    def memory_granted_mib(self) -> int:
        return sum(n.memory_granted_mib for n in self.nodes)

    @property
    def gpus(self) -> int:
        return sum(len(n.gpus) for n in self.nodes)

    @property
    def core_granted_milli(self) -> int:
        return sum(n.core_granted_milli for n in self.nodes)


def build_view(
    nodes: Sequence[Node],
    pods: Iterable[Pod],
    protocol: KitProtocol,
    verifier: KeyRing | None = None,
    only: str | None = None,
    claimed: Mapping[str, Sequence[PodShare]] | None = None,
) -> ClusterView:
    """The view of `nodes` (only the one named `only`, when given) with the bound, not terminated
    `pods`. Nodes without GPUs are left out unless named. Signatures are checked when `verifier`
    is given (the key ring of the scheduler's Secret), as the scheduler checks them. `claimed`: GPU
    UUID -> the shares DRA claims hold there (`inspect_claims.claim_shares`), counted beside the pods'."""
    authority = AssignmentAuthority(protocol, signed=verifier is not None)
    by_node: dict[str, list[Pod]] = {}
    for pod in pods:
        bound = str((pod.get("spec") or {}).get("nodeName") or "")
        if bound and not is_terminated(pod) and not meta(pod).get("deletionTimestamp"):
            by_node.setdefault(bound, []).append(pod)
    views = []
    for node in sorted(nodes, key=lambda n: str(meta(n).get("name", ""))):
        state = node_state(node, protocol)
        name = str(state.meta.name)
        if (only is not None and name != only) or (only is None and not state.inventory.gpus and not state.problem):
            continue
        view = _node_view(node, state, by_node.get(name, []), authority, verifier, protocol)
        views.append(_with_claims(view, claimed) if claimed else view)
    return ClusterView(tuple(views), verifier is not None)


def _node_view(
    node: Node,
    state: NodeState,
    pods: Sequence[Pod],
    authority: AssignmentAuthority,
    verifier: KeyRing | None,
    protocol: KitProtocol,
) -> NodeView:
    shares: dict[str, list[PodShare]] = {}
    migs: dict[str, list[MigView]] = {}
    ignored: list[Ignored] = []
    for pod in sorted(pods, key=lambda p: (str(meta(p).get("namespace", "")), str(meta(p).get("name", "")))):
        m = meta(pod)
        namespace, name, uid = str(m.get("namespace", "default")), str(m.get("name", "")), str(m.get("uid") or "")
        try:
            request = parse_pod_request(pod, protocol)
        except RequestError as exc:
            if (m.get("annotations") or {}).get(protocol.annotations.assignment):
                ignored.append(Ignored(namespace, name, "requests", f"its request cannot be read: {exc}"))
            continue
        seal = _seal(pod, uid, protocol, verifier) if verifier is not None else None
        verdict, _ = authority.judge(pod, uid, request, state, seal)
        if verdict.reason:
            ignored.append(Ignored(namespace, name, verdict.reason, verdict.message))
        elif verdict.assignment is not None:
            _book(verdict.assignment, namespace, name, shares, migs)
    gpus = tuple(_gpu_view(gpu, shares.get(gpu.uuid, []), migs.get(gpu.uuid, [])) for gpu in state.inventory.gpus)
    return NodeView(str(state.meta.name), _address(node), state.meta.ready, gpus, tuple(ignored), state.problem)


def _with_claims(view: NodeView, claimed: Mapping[str, Sequence[PodShare]]) -> NodeView:
    gpus = tuple(replace(g, shares=(*g.shares, *claimed.get(g.uuid, ()))) for g in view.gpus)
    return replace(view, gpus=gpus)


def _seal(pod: Pod, uid: str, protocol: KitProtocol, verifier: KeyRing) -> Seal:
    """The signature check the scheduler's `SignatureCheck` makes, with the same outcome values."""
    annotations = meta(pod).get("annotations") or {}
    text = str(annotations.get(protocol.annotations.assignment) or "")
    signature = str(annotations.get(protocol.annotations.assignment_signature) or "")
    problem = signature_problem(verifier, uid, text, signature or None)
    if not problem:
        return VERIFIED
    key_id = key_id_of(signature)
    return Seal(problem, bool(key_id) and key_id not in verifier.key_ids)


def _book(
    assignment: Assignment,
    namespace: str,
    pod: str,
    shares: dict[str, list[PodShare]],
    migs: dict[str, list[MigView]],
) -> None:
    for container, held in sorted(assignment.containers.items()):
        for share in held:
            gpu = _physical(share)
            mig_uuid = str(share.uuid) if share.mig_profile else ""
            if share.mig_profile:
                migs.setdefault(gpu, []).append(
                    MigView(share.mig_profile, share.mig_start, share.uuid, f"{namespace}/{pod}")
                )
            shares.setdefault(gpu, []).append(
                PodShare(namespace, pod, container, share.core_milli, share.memory_mib, share.mig_profile, mig_uuid)
            )


def _physical(share: GpuShare) -> str:
    return str(share.parent_uuid) if share.mig_profile and share.parent_uuid else str(share.uuid)


def _gpu_view(gpu: Gpu, shares: list[PodShare], held: list[MigView]) -> GpuView:
    by_uuid = {m.uuid: m for m in held}
    listed = [by_uuid.pop(d.uuid, MigView(d.profile, d.start, d.uuid)) for d in gpu.mig_devices]
    mig = tuple(sorted([*listed, *by_uuid.values()], key=lambda m: (m.start, m.uuid)))
    if gpu.mig_mode.value != "off":  # a MIG slice's compute is its profile's, not a share of the GPU
        shares = [replace(s, core_milli=0) for s in shares]
    return GpuView(gpu.index, gpu.uuid, gpu.model, gpu.memory_mib, gpu.healthy, gpu.mig_mode.value, tuple(shares), mig)


def _address(node: Node) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address", ""))
    return ""
