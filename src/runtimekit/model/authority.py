"""Who may write an assignment, and what it may say: the scheduler's signature, and the pod's own requests.

An assignment annotation decides which GPUs a container sees, and any user who can create a pod can
write annotations and `spec.nodeName`. So an assignment counts only when
- it carries the scheduler's signature: an HMAC, by a key only the scheduler and the device plugin
  hold, over the pod's UID and the annotation's exact text (`signing_message`); the UID is chosen by
  the API server, so a signature copied to another pod does not verify, and any edit of the text
  breaks it; and
- it gives each container exactly what the container asks for, read with the scheduler's own
  request parsing (`runtimekit.model.request`): as many GPUs as asked, each GPU once, whole GPUs at
  1000 milli and all their memory, shares at the asked milli and memory (memory in proportion to the
  compute share where none is asked, as the scheduler computes it), MIG slices of the asked profile,
  each slot once; nothing for a container that asks for no GPU (`request_problems`; gpu-memory
  counted in the node's unit, `request_in_unit`).
Pure functions; the signer and verifier are `runtimekit.base.keyring.KeyRing` in the kit.
Callers: the scheduler's live cache (signs at binding, and books only assignments that pass both
checks), the device plugin (checks at Allocate), the embedded API server's GPU columns
(`shape_problems`: what can be checked without the key or the node's GPUs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from runtimekit.model.assignment import Assignment, GpuShare
from runtimekit.model.request import MILLI_PER_GPU, GpuKind, GpuRequest, PodRequest

CONTEXT = b"runtimekit.aliyun.com/gpu-assignment/v1"


class Signer(Protocol):
    def sign(self, message: bytes) -> str: ...


class Verifier(Protocol):
    def verify(self, message: bytes, signature: str) -> str:
        """Why the signature is not valid, or ""."""
        ...


def signing_message(uid: str, text: str) -> bytes:
    """What is signed: a context string, the pod UID and the annotation's text, separated by NULs."""
    return b"\0".join((CONTEXT, uid.encode(), text.encode()))


def sign_assignment(signer: Signer, uid: str, text: str) -> str:
    return signer.sign(signing_message(uid, text))


def signature_problem(verifier: Verifier, uid: str, text: str, signature: str | None) -> str:
    """Why the assignment `text` of pod `uid` is not the scheduler's, or ""."""
    if not uid:
        return "the pod has no UID to check its assignment's signature against"
    if not signature:
        return "it is not signed by the scheduler (pods may not write their own assignment)"
    problem = verifier.verify(signing_message(uid, text), signature)
    return f"its signature is not the scheduler's: {problem}" if problem else ""


def request_problems(
    assignment: Assignment, request: PodRequest, gpu_memory: Mapping[str, int] | None = None
) -> list[str]:
    """Where the assignment differs from what the pod asks (empty when it is exactly that).
    `gpu_memory`: MiB per GPU UUID, to check whole GPUs and proportional memory (skipped when unknown)."""
    memory = gpu_memory or {}
    asked = {c.container: c.gpu for c in request.gpus}
    problems = [
        f"container {name!r} asks for no GPU but is assigned {len(shares)}"
        for name, shares in sorted(assignment.containers.items())
        if shares and name not in asked
    ]
    for name, gpu in asked.items():
        shares = assignment.containers.get(name, ())
        problems += [f"container {name!r}: {p}" for p in _container_problems(gpu, shares, memory)]
    return problems


def differs_message(problems: Sequence[str]) -> str:
    """Why an assignment is refused, from `request_problems`' list (non-empty): the first three."""
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return f"it differs from the pod's requests: {'; '.join(problems[:3])}{more}"


def shape_problems(assignment: Assignment, request: PodRequest) -> list[str]:
    """`request_problems` without memory amounts, for a caller that knows neither the node's GPUs nor
    its memory unit: as many GPUs per container as asked, each once, the asked compute share or MIG
    profile, nothing for a container that asks for no GPU."""
    gpus = tuple(
        replace(c, gpu=replace(c.gpu, memory_mib=None, memory_percent=None)) if c.gpu.kind is GpuKind.SHARE else c
        for c in request.gpus
    )
    return request_problems(assignment, replace(request, gpus=gpus))


def request_in_unit(request: PodRequest, default_mib: int, unit_mib: int) -> PodRequest:
    """`request` (gpu-memory read with `default_mib` per unit, the protocol's) on a node whose unit is
    `unit_mib`: what the scheduler assigns there and the node's device plugin checks."""
    if unit_mib == default_mib:
        return request
    gpus = tuple(
        replace(c, gpu=replace(c.gpu, memory_mib=c.gpu.memory_mib // default_mib * unit_mib))
        if c.gpu.kind is GpuKind.SHARE and c.gpu.memory_mib is not None
        else c
        for c in request.gpus
    )
    return replace(request, gpus=gpus)


def duplicate_problems(shares: Sequence[GpuShare]) -> list[str]:
    """GPUs (or MIG slots) named twice in one container's shares."""
    seen: set[tuple[str, str, int]] = set()
    out = []
    for share in shares:
        if share.mig_profile:
            key = (share.parent_uuid or share.uuid, share.mig_profile, share.mig_start)
        else:
            key = (share.uuid, "", -1)
        if key in seen:
            slot = f"MIG slot {share.mig_profile}@{share.mig_start} of " if share.mig_profile else ""
            what = f"{slot}GPU {key[0]}"
            out.append(f"{what} is assigned twice")
        seen.add(key)
    return out


def _container_problems(gpu: GpuRequest, shares: Sequence[GpuShare], memory: Mapping[str, int]) -> list[str]:
    if len(shares) != gpu.count:
        unit = f"{gpu.mig_profile} MIG slices" if gpu.kind is GpuKind.MIG else "GPUs"
        return [f"asks for {gpu.count} {unit}, assigned {len(shares)}"]
    problems = duplicate_problems(shares)
    for share in shares:
        problems += _share_problems(gpu, share, memory.get(share.uuid))
    return problems


def _share_problems(gpu: GpuRequest, share: GpuShare, total: int | None) -> list[str]:
    where = f"GPU {share.parent_uuid or share.uuid}"
    if gpu.kind is GpuKind.MIG:
        if share.mig_profile != gpu.mig_profile:
            return [f"{where}: asks for {gpu.mig_profile} MIG slices, assigned {share.mig_profile or 'a GPU share'}"]
        return []
    if share.mig_profile:
        return [f"{where}: asks for {gpu.kind.value} GPUs, assigned a {share.mig_profile} MIG slice"]
    core = MILLI_PER_GPU if gpu.kind is GpuKind.WHOLE else gpu.core_milli
    if share.core_milli != core:
        return [f"{where}: asks for {core} milli, assigned {share.core_milli}"]
    wanted = gpu.memory_mib if gpu.kind is GpuKind.SHARE and gpu.memory_mib is not None else None
    if wanted is None and total is not None:
        wanted = gpu.memory_on(total)
    if wanted is not None and share.memory_mib != wanted:
        return [f"{where}: asks for {wanted} MiB, assigned {share.memory_mib}"]
    return []
