"""How far the runtime can trust its allocations, and how it makes them whole again from the node's pods.

`Recovery` is the runtime's record of it (the service holds its lock around every use):
- `load` reads the checkpoint and journal into the book: a corrupt file is UNRECOVERED (new
  allocations refused until `rebuild_corrupt` has rebuilt every allocation from the live pods'
  assignments); a torn last journal line is reported (log, status, `torn_total`), never dropped
  silently, and makes the state RECOVERED once the pods have been compared;
- `rebuild_missing` (every start and every reconciliation) books an allocation for each container
  that holds devices without one (`runtimekit.runtime.rebuild`) and counts them; what cannot be
  rebuilt is `unaccounted`, and the state is INCOMPLETE (new allocations refused) until it clears;
- while pod sources are configured and none has answered since start, the state is UNVERIFIED; so it
  is after a torn journal line with no source to compare with.
The effective state is OK or RECOVERED only when the allocations cover what runs on the node
(`CheckpointStatus.trusted`): GetStatus, the exporter's metrics and `runtime-admin ready` say so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from runtimekit.api.podresources_client import ListedPod
from runtimekit.kube.objects import Pod
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.allocations import AllocationBook
from runtimekit.runtime.backend import DeviceInfo
from runtimekit.runtime.pods import allocations_from_pods
from runtimekit.runtime.rebuild import Missing, evidence, missing_allocations
from runtimekit.runtime.state import CheckpointCorrupt, StateDir
from runtimekit.runtime.values import AllocationState, CheckpointStatus

log = logging.getLogger(__name__)
MAX_MESSAGE = 2000  # the status message keeps the latest notes


@dataclass
class Recovery:
    """See the module docstring. Not thread-safe: the service's lock guards it."""

    sources: bool = False  # some source of the node's pods is configured
    base: CheckpointStatus = CheckpointStatus.OK
    message: str = ""
    verified: bool = False
    unaccounted: tuple[str, ...] = ()
    rebuilt_total: int = 0
    torn_total: int = 0

    @property
    def effective(self) -> CheckpointStatus:
        if self.base is CheckpointStatus.UNRECOVERED:
            return self.base
        if self.unaccounted:
            return CheckpointStatus.INCOMPLETE
        if (self.sources or self.torn_total) and not self.verified:
            return CheckpointStatus.UNVERIFIED
        return self.base

    def state(self) -> AllocationState:
        return AllocationState(self.effective, self.rebuilt_total, self.torn_total, self.unaccounted)

    def refusal(self) -> str:
        """Why new allocations are refused now, or ""."""
        if self.base is CheckpointStatus.UNRECOVERED:
            return f"allocation state not recovered yet: {self.message}"
        if self.unaccounted:
            return f"running containers hold GPUs this runtime has no allocation for: {'; '.join(self.unaccounted[:3])}"
        return ""

    def note(self, text: str) -> None:
        message = f"{self.message}; {text}" if self.message else text
        self.message = message if len(message) <= MAX_MESSAGE else "…" + message[-MAX_MESSAGE:]

    # -- loading --------------------------------------------------------------------------------
    def load(self, state: StateDir, book: AllocationBook, node: str) -> None:
        try:
            loaded = state.load_allocations()
        except CheckpointCorrupt as exc:
            self.base = CheckpointStatus.UNRECOVERED
            self.message = f"checkpoint {state.checkpoint} is corrupt ({exc})"
            log.error("%s; rebuilding the allocations from the pods of node %s", self.message, node)
            return
        if loaded is None:
            self.message = "no checkpoint yet"
            return
        written_for, allocations = loaded
        if written_for != node:
            log.warning("checkpoint was written for node %s, this is node %s; using it anyway", written_for, node)
        problems = book.restore(allocations)
        for allocation, why in problems:
            log.error("checkpointed allocation of %s/%s not restored: %s", allocation.pod, allocation.container, why)
        self.message = f"restored {len(book)} allocations" + (
            f", {len(problems)} could not be restored (see the log)" if problems else ""
        )
        if state.torn_bytes:
            self.torn_total += 1
            self.base = CheckpointStatus.RECOVERED
            self.note(
                f"the last line of {state.journal} was torn ({state.torn_bytes} bytes, a write cut short): the "
                "change it held is lost; the node's pods are compared to rebuild it"
            )
            log.error("%s", self.message)

    def rebuild_corrupt(
        self,
        pods: Sequence[Pod],
        book: AllocationBook,
        state: StateDir,
        node: str,
        protocol: KitProtocol,
        now_ms: int,
    ) -> None:
        """Every allocation again from the live pods' assignments (the checkpoint is corrupt); the bad
        files are set aside. The caller saves the book."""
        allocations, skipped = allocations_from_pods(pods, node, protocol, now_ms)
        for why in skipped:
            log.warning("while rebuilding: %s", why)
        problems = book.restore(allocations)
        for allocation, why in problems:
            log.error("rebuilt allocation of %s/%s not booked: %s", allocation.pod, allocation.container, why)
        aside = state.set_aside_checkpoint(now_ms)
        self.base = CheckpointStatus.RECOVERED
        self.rebuilt_total += len(book)
        self.note(f"rebuilt {len(book)} allocations from the node's pods (old file: {aside})")
        log.warning("%s", self.message)

    # -- comparing with the pods --------------------------------------------------------------
    def rebuild_missing(
        self,
        book: AllocationBook,
        api_pods: Sequence[Pod] | None,
        listing: Sequence[ListedPod] | None,
        devices: Sequence[DeviceInfo],
        node: str,
        protocol: KitProtocol,
        now_ms: int,
    ) -> list[Missing]:
        """Book an allocation for each container holding devices without one; returns what was booked.
        Call only when a source answered (`api_pods` or `listing`)."""
        self.verified = True
        proof = evidence(api_pods, listing, protocol)
        found, unaccounted = missing_allocations(book.all(), proof, api_pods, devices, node, protocol, now_ms)
        booked = []
        for item in found:
            problems = book.restore([item.allocation])
            if problems:
                a, why = problems[0]
                unaccounted.append(f"{a.pod.namespace}/{a.pod.name} container {a.container}: cannot be rebuilt: {why}")
            else:
                booked.append(item)
        if booked:
            self.rebuilt_total += len(booked)
            if self.base is CheckpointStatus.OK:
                self.base = CheckpointStatus.RECOVERED
            self.note(f"rebuilt {len(booked)} allocations of running containers missing from the checkpoint")
        if tuple(unaccounted) != self.unaccounted and unaccounted:
            log.error("containers hold GPUs without an allocation: %s", "; ".join(unaccounted))
        self.unaccounted = tuple(unaccounted)
        return booked
