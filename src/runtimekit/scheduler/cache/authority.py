"""Whether the scheduler books a bound pod's GPUs as its assignment annotation says
(docs/security.md#assignments). Asked by the cluster cache (`cluster.py`, under its lock) for each
bound pod it books from the pod's own manifest: after a restart, for pods bound by another scheduler
or replica, and for pods whose author set `spec.nodeName`; never for the pods this scheduler binds
itself (their booking is the placement it chose).

The signature is checked before the pod reaches the cache (`signatures.py`, which holds the key
ring); the cache receives its outcome as a `Seal` value with the pod's event and never holds the
key, since plugins reach the cache (through the binding's volumes).

Anyone who may create pods may write `spec.nodeName` and annotations, and a pod that asks for no GPU
never meets the device plugin: kubelet runs it whatever its assignment claims. So an assignment is
booked only when
- it can be read and names the node the pod is bound to;
- it carries the scheduler's signature over the pod's UID and the annotation's text (the `Seal`),
  when the scheduler holds the key ring (`signed`; without one it signs nothing either, and only the
  next check is made); and
- it gives each container exactly what the container asks for (`model.authority.request_problems`,
  gpu-memory counted in the node's unit, whole GPUs and proportional memory against the node's
  inventory), as the device plugin checks at Allocate.
Any other assignment is ignored: the pod holds its CPU, memory and other resources, no GPU. The
verdict says why (`reason`, one of `REASONS`, the label of the scheduler's
`runtimekit_scheduler_unverified_assignments_total`), and `judge` says once per pod and annotation
text that it is new (the cache writes a Warning Event and counts it).

One exception keeps a key rotation from un-booking running pods: a signature by a key the ring no
longer holds (rotated out) counts once kubelet has admitted the pod (`status.startTime` set, the pod
not failed): the device plugin admits a GPU pod only with an assignment that verified then, and a pod
that asks for no GPU fails the request check anyway.

A pod booked from its assignment is not asked about again while it stays booked (the cache confirms
its booking); a refused verdict is kept per pod UID with the annotation text, signature, seal and
admission it judged, so the pod's later events cost a dict lookup and report nothing new, and it is
made again when its seal changes (the key ring did) or the pod is admitted. `forget` drops a pod's.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtimekit.kube.objects import Pod, meta
from runtimekit.model import Assignment, AssignmentError, PodRequest
from runtimekit.model.authority import differs_message, request_in_unit, request_problems
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.names import memory_unit_mib
from runtimekit.scheduler.cache.objects import NodeState

UNREADABLE, OTHER_NODE, UNSIGNED, SIGNATURE, REQUESTS = "unreadable", "other_node", "unsigned", "signature", "requests"
REASONS = (UNREADABLE, OTHER_NODE, UNSIGNED, SIGNATURE, REQUESTS)
EVENT_REASON = "UnverifiedAssignment"  # the Warning Event on a pod whose assignment is ignored


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the cache books of a pod's assignment: `assignment` (None: no GPU), and when one was
    written but is ignored, why (`reason`, one of REASONS, and a sentence for the pod's Event)."""

    assignment: Assignment | None = None
    reason: str = ""
    message: str = ""

    def event_message(self, node: str) -> str:
        """The Warning Event's text on the pod of an ignored assignment."""
        return f"the scheduler books no GPU of node {node} for this pod, only its CPU and memory: {self.message}"


NO_ASSIGNMENT = Verdict()


@dataclass(frozen=True, slots=True)
class Seal:
    """What the key ring said of a pod's assignment signature (`signatures.SignatureCheck`): why it
    does not verify ("" when it does: `VERIFIED`), and whether it names a key the ring does not hold
    (rotated out, or not read yet)."""

    problem: str = ""
    unknown_key: bool = False


VERIFIED = Seal()
NOT_CHECKED = Seal("its signature was not checked")  # a signed cache given a bound pod without a seal


@dataclass(slots=True)
class _Judged:
    text: str
    signature: str
    admitted: bool
    seal: Seal | None
    verdict: Verdict

    def stands(self, admitted: bool, seal: Seal | None) -> bool:
        return self.admitted == admitted and self.seal == seal


class AssignmentAuthority:
    """See the module docstring. Not thread-safe: the cluster cache calls it under its lock."""

    def __init__(self, protocol: KitProtocol, signed: bool = False) -> None:
        self.protocol = protocol
        self.signed = signed  # signatures are checked: a bound pod's event comes with a Seal
        self.ignored = dict.fromkeys(REASONS, 0)  # assignments ignored (once per pod and text), by reason
        self._judged: dict[str, _Judged] = {}

    def judge(
        self, pod: Pod, uid: str, request: PodRequest, node: NodeState, seal: Seal | None = None
    ) -> tuple[Verdict, bool]:
        """The verdict on `pod`'s assignment on `node` (the pod's own, `request` read from it, `seal`
        its signature's check), and whether it ignores an assignment not reported before (counted in
        `ignored` as it is returned)."""
        names = self.protocol.annotations
        annotations = meta(pod).get("annotations") or {}
        text = annotations.get(names.assignment)
        if not text:
            self._judged.pop(uid, None)
            return NO_ASSIGNMENT, False
        text, signature = str(text), str(annotations.get(names.assignment_signature) or "")
        if self.signed and seal is None:
            seal = NOT_CHECKED
        admitted = _admitted(pod)
        seen = self._judged.get(uid)
        if seen is not None and seen.text == text and seen.signature == signature:
            # made again when its seal changes (the keys did) or kubelet admits the pod
            if seen.stands(admitted, seal):
                return seen.verdict, False
            reported = bool(seen.verdict.reason)  # this text was refused, and said so, before
        else:
            reported = False
        verdict = self._verdict(text, signature, seal, admitted, request, node)
        if verdict.reason:
            self._judged[uid] = _Judged(text, signature, admitted, seal, verdict)
        else:  # booked: its later events confirm the booking without asking again
            self._judged.pop(uid, None)
        if not verdict.reason or reported:
            return verdict, False
        self.ignored[verdict.reason] += 1
        return verdict, True

    def forget(self, uid: str) -> None:
        self._judged.pop(uid, None)

    def _verdict(
        self, text: str, signature: str, seal: Seal | None, admitted: bool, request: PodRequest, node: NodeState
    ) -> Verdict:
        try:
            assignment = Assignment.from_annotation(text)
        except AssignmentError as exc:
            return Verdict(None, UNREADABLE, f"its assignment cannot be read: {exc}")
        name = node.meta.name
        if assignment.node != name:
            return Verdict(None, OTHER_NODE, f"its assignment is for node {assignment.node}, but it is bound to {name}")
        refused = _signature(seal, signature, admitted)
        if refused is not None:
            return refused
        on_node = request_in_unit(request, self.protocol.memory_unit_mib, self._memory_unit(node))
        problems = request_problems(assignment, on_node, {gpu.uuid: gpu.memory_mib for gpu in node.inventory.gpus})
        if problems:
            return Verdict(None, REQUESTS, differs_message(problems))
        return Verdict(assignment)

    def _memory_unit(self, node: NodeState) -> int:
        """MiB per gpu-memory unit on the node (its label, as the gpushare plugin reads it)."""
        text = node.meta.labels.get(self.protocol.labels.memory_unit)
        if text is None:
            return self.protocol.memory_unit_mib
        try:
            return memory_unit_mib(text)
        except ValueError:
            return self.protocol.memory_unit_mib


def _signature(seal: Seal | None, signature: str, admitted: bool) -> Verdict | None:
    """Why the signature does not count (None: it does, or it was not checked: no key ring)."""
    if seal is None or not seal.problem:
        return None
    if not signature:
        return Verdict(None, UNSIGNED, seal.problem)
    if admitted and seal.unknown_key:
        # signed with a key rotated out since: the device plugin checked it when it admitted the pod
        return None
    return Verdict(None, SIGNATURE, seal.problem)


def _admitted(pod: Pod) -> bool:
    """Whether kubelet admitted the pod: it started it (a pod kubelet refuses is Failed, and the cache
    forgets terminated pods before asking)."""
    status = pod.get("status") or {}
    return bool(status.get("startTime")) and status.get("phase") != "Failed"
