"""What the webhook is told at start: the protocol's names, the scheduler mode and who the kit's
scheduler is. Pure values; built by `runtimekit webhook` and `runtimekit up`, read by the decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol

SCHEDULER_USER = "system:serviceaccount:kube-system:lj-runtimekit-scheduler"  # deploy/scheduler's ServiceAccount
DEFAULT_SCHEDULER = "default-scheduler"
HAMI_OPT_OUT = ("hami.io/webhook", "ignore")  # HAMi's label: its webhook leaves such pods and namespaces alone


class SchedulerMode(StrEnum):
    STANDALONE = "standalone"  # the kit's scheduler places GPU pods: the webhook names it in them
    EXTENDER = "extender"  # kube-scheduler places them, asking the kit as an extender: pods keep their name


def speaks_hami(protocol: KitProtocol) -> bool:
    """Whether the protocol has HAMi's resource names (the `hami` preset, or a file copied from it)."""
    return protocol.resources == preset_protocol("hami").resources


@dataclass(frozen=True)
class WebhookSettings:
    protocol: KitProtocol
    mode: SchedulerMode = SchedulerMode.STANDALONE
    scheduler_users: frozenset[str] = field(default_factory=lambda: frozenset({SCHEDULER_USER}))
    hami: bool = field(init=False)  # HAMi's webhook rules apply: its GPU count default and its opt-out label

    def __post_init__(self) -> None:
        object.__setattr__(self, "hami", speaks_hami(self.protocol))  # read for every review: decided once
