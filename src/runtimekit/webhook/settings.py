"""What the webhook is told at start: the protocol's names, the scheduler mode and who the kit's
scheduler is. Pure values; built by `runtimekit webhook` and `runtimekit up`, read by the decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import speaks_hami

SCHEDULER_USER = "system:serviceaccount:kube-system:lj-runtimekit-scheduler"  # deploy/scheduler's ServiceAccount
DEFAULT_SCHEDULER = "default-scheduler"
HAMI_OPT_OUT = ("hami.io/webhook", "ignore")  # HAMi's label: its webhook leaves such pods and namespaces alone


class SchedulerMode(StrEnum):
    STANDALONE = "standalone"  # the kit's scheduler places GPU pods: the webhook names it in them
    # kube-scheduler places them, asking the kit as an extender: the webhook names the kube-scheduler
    # profile that calls the extender (`extender_profile`); `default-scheduler` leaves pods as they are,
    # for a cluster whose own kube-scheduler calls it
    EXTENDER = "extender"


@dataclass(frozen=True)
class WebhookSettings:
    protocol: KitProtocol
    mode: SchedulerMode = SchedulerMode.STANDALONE
    scheduler_users: frozenset[str] = field(default_factory=lambda: frozenset({SCHEDULER_USER}))
    # extender mode: the kube-scheduler profile whose configuration calls the kit's extender ("": the
    # protocol's scheduler name, as deploy/scheduler/extender names the profile)
    extender_profile: str = ""
    # HAMi's `runtimeClassName`: the RuntimeClass a GPU pod naming none is given ("": none)
    runtime_class: str = ""
    # HAMi's `overwriteEnv`: containers that ask for no GPU get NVIDIA_VISIBLE_DEVICES=none, so a node
    # whose default container runtime is NVIDIA's shows them no GPU (an image may say `all`)
    overwrite_env: bool = False
    hami: bool = field(init=False)  # HAMi's webhook rules apply: its GPU count default and its opt-out label

    def __post_init__(self) -> None:
        object.__setattr__(self, "hami", speaks_hami(self.protocol))  # read for every review: decided once

    @property
    def scheduler_for_gpu_pods(self) -> str:
        """The schedulerName a GPU pod naming none (or `default-scheduler`) is given; `default-scheduler`
        means it is left as it is."""
        if self.mode is SchedulerMode.STANDALONE:
            return self.protocol.scheduler_name
        return self.extender_profile or self.protocol.scheduler_name
