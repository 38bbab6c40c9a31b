"""Whether the device plugin honours a pod's assignment: the scheduler wrote it, and it gives exactly
what the pod asks for (docs/security.md#assignments, `runtimekit.model.authority`).

`AssignmentCheck.problem` is asked for every pod the plugin considers at Allocate; a pod whose
assignment fails is never a candidate, and the refusal kubelet shows on it names why
(`UnexpectedAdmissionError: Allocate failed due to … its assignment was refused: it is not signed
by the scheduler …`). Without a key ring every assignment is refused: a plugin that cannot check
signatures must not accept any (the CLI refuses to start without one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from runtimekit.base.keyring import KeyRing
from runtimekit.kube.objects import Pod, meta
from runtimekit.model import Assignment, RequestError, parse_pod_request
from runtimekit.model.authority import differs_message, request_in_unit, request_problems, signature_problem
from runtimekit.protocol import KitProtocol

GpuMemory = Callable[[], Mapping[str, int]]  # MiB per GPU UUID, as the runtime reports them


class AssignmentCheck:
    """See the module docstring. Thread-safe (the key ring is)."""

    def __init__(
        self, keys: KeyRing | None, protocol: KitProtocol, gpu_memory: GpuMemory = dict, memory_unit_mib: int = 0
    ) -> None:
        self.keys, self.protocol, self._gpu_memory = keys, protocol, gpu_memory
        self.memory_unit_mib = memory_unit_mib or protocol.memory_unit_mib  # this node's gpu-memory device

    @property
    def generation(self) -> int:
        """Changes when the keys do, so cached verdicts are made again."""
        return -1 if self.keys is None else self.keys.generation

    def problem(self, pod: Pod, text: str, assignment: Assignment) -> str:
        """Why the pod's assignment (`text`, parsed as `assignment`) is refused, or ""."""
        m = meta(pod)
        annotations = m.get("annotations") or {}
        if self.keys is None:
            return "its assignment was refused: this device plugin has no assignment key to check it with"
        signature = annotations.get(self.protocol.annotations.assignment_signature)
        why = signature_problem(self.keys, str(m.get("uid", "")), text, str(signature) if signature else None)
        if why:
            return f"its assignment was refused: {why}"
        try:
            request = parse_pod_request(pod, self.protocol)
        except RequestError as exc:
            return f"its assignment was refused: its requests cannot be read: {exc}"
        # gpu-memory counted in this node's unit, as the scheduler counts it here
        on_this_node = request_in_unit(request, self.protocol.memory_unit_mib, self.memory_unit_mib)
        problems = request_problems(assignment, on_this_node, self._gpu_memory())
        return f"its assignment was refused: {differs_message(problems)}" if problems else ""
