"""A pod's own placement policy: one policy name (the protocol's `annotations.policy`), or a node
policy and a GPU policy apart (`<node>/<gpu>`, from `annotations.nodePolicy` and `.gpuPolicy`: HAMi's
`hami.io/node-scheduler-policy` and `hami.io/gpu-scheduler-policy`).

A split policy scores nodes as its node policy does and picks the GPUs inside the chosen node as its
GPU policy does; an empty part is the plugin's default for that part (the default may be split too:
`gpushare.policy: binpack/spread` is HAMi's default, binpack nodes and spread cards). HAMi's values
map onto the policies of the same names: `binpack` (the node whose GPUs are fullest; the fitting GPU
with the least left) and `spread` (the emptiest node; the GPU with the most left). A HAMi GPU policy
may be a comma-separated chain (`binpack,numa`); its first entry that names a policy here decides;
`mutex` (only unused GPUs) is a filter the GPU selector applies, so `mutex` alone keeps the default
order. A part that names no policy here (`topology-aware`, `numa`, a typo) takes the default part, as
HAMi falls back to its defaults for a value it does not know (logged once per value; the assignment's
`policy` says which policies placed the pod). Callers: the gpushare plugin.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from runtimekit.model import GpuRequest
from runtimekit.model.ledger import IntArray
from runtimekit.model.selector import MUTEX
from runtimekit.scheduler.plugins.gpushare.policies import PodShape, Policy, PolicyContext

SPLIT = "/"
log = logging.getLogger(__name__)


class SplitPolicy:
    """Node scores from one policy, GPU choice from another."""

    def __init__(self, node: Policy, gpu: Policy) -> None:
        self.node, self.gpu = node, gpu
        self.name = f"{node.name}{SPLIT}{gpu.name}"

    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        return self.node.score(ctx, shape, rows)

    def choose(self, ctx: PolicyContext, shape: PodShape, req: GpuRequest, row: int, fitting: IntArray) -> list[int]:
        return self.gpu.choose(ctx, shape, req, row, fitting)


def _part(text: str, policies: Mapping[str, Policy], key: str) -> str:
    """The policy a part names ("" for the default, also when it names none known). HAMi's `mutex`
    is no order but a filter (`GpuSelector.unused_only`): it leaves the order to the other entries."""
    entries = [entry.strip() for entry in text.split(",") if entry.strip() and entry.strip() != MUTEX]
    found = next((entry for entry in entries if entry in policies), "")
    if entries and not found:
        log.info(
            "%s %r names no placement policy here (known: %s); the default is used", key, text, ", ".join(policies)
        )
    return found


def defaults(policy: str) -> tuple[str, str]:
    """The node and GPU defaults of the plugin's policy (`binpack/spread`, or one name for both)."""
    node, _, gpu = policy.partition(SPLIT)
    return (node, gpu) if gpu else (policy, policy)


def resolve(
    asked: str, policies: Mapping[str, Policy], default: str, keys: tuple[str, str], cache: dict[str, Policy]
) -> Policy:
    """The policy a pod's `asked` value stands for. `default` is the plugin's policy (an empty part, or
    one naming no policy here, takes its part of it); `keys` are the node and GPU annotation names;
    `cache` keeps built split policies."""
    found = cache.get(asked)
    if found is not None:
        return found
    node_text, _, gpu_text = asked.partition(SPLIT)
    parts: list[str] = []
    for text, key, fallback in zip((node_text, gpu_text), keys, defaults(default), strict=True):
        parts.append(_part(text, policies, key) or fallback)
    split = cache[asked] = SplitPolicy(policies[parts[0]], policies[parts[1]])
    return split


def is_split(asked: str) -> bool:
    return SPLIT in asked
