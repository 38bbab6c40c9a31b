"""A pod's own placement policy: one policy name (the protocol's `annotations.policy`), or a node
policy and a GPU policy apart (`<node>/<gpu>`, from `annotations.nodePolicy` and `.gpuPolicy`: HAMi's
`hami.io/node-scheduler-policy` and `hami.io/gpu-scheduler-policy`).

A split policy scores nodes as its node policy does and picks the GPUs inside the chosen node as its
GPU policy does; an empty part is the plugin's default policy. HAMi's values map onto the policies of
the same names: `binpack` (the node whose GPUs are fullest; the fitting GPU with the least left) and
`spread` (the emptiest node; the GPU with the most left). A HAMi GPU policy may be a comma-separated
chain (`binpack,numa`); its first entry that names a policy here decides; `mutex` (only unused GPUs)
is a filter the GPU selector applies, so `mutex` alone keeps the default order. Callers: the gpushare plugin.
"""

from __future__ import annotations

from collections.abc import Mapping

from runtimekit.model import GpuRequest
from runtimekit.model.ledger import IntArray
from runtimekit.model.selector import MUTEX
from runtimekit.scheduler.plugins.gpushare.policies import PodShape, Policy, PolicyContext

SPLIT = "/"


class SplitPolicy:
    """Node scores from one policy, GPU choice from another."""

    def __init__(self, node: Policy, gpu: Policy) -> None:
        self.node, self.gpu = node, gpu
        self.name = f"{node.name}{SPLIT}{gpu.name}"

    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        return self.node.score(ctx, shape, rows)

    def choose(self, ctx: PolicyContext, shape: PodShape, req: GpuRequest, row: int, fitting: IntArray) -> list[int]:
        return self.gpu.choose(ctx, shape, req, row, fitting)


def _part(text: str, policies: Mapping[str, Policy]) -> str | None:
    """The policy a part names ("" for the default), or None when it names none known. HAMi's `mutex`
    is no order but a filter (`GpuSelector.unused_only`): it leaves the order to the other entries."""
    entries = [entry.strip() for entry in text.split(",") if entry.strip() and entry.strip() != MUTEX]
    if not entries:
        return ""
    return next((entry for entry in entries if entry in policies), None)


def resolve(
    asked: str, policies: Mapping[str, Policy], default: str, keys: tuple[str, str], cache: dict[str, Policy]
) -> Policy | str:
    """The policy a pod's `asked` value stands for, or why it stands for none (a message naming the
    annotation). `keys` are the node and GPU annotation names; `cache` keeps built split policies."""
    found = cache.get(asked)
    if found is not None:
        return found
    node_text, _, gpu_text = asked.partition(SPLIT)
    parts: list[str] = []
    for text, key in ((node_text, keys[0]), (gpu_text, keys[1])):
        name = _part(text, policies)
        if name is None:
            return f"unknown placement policy {text!r} in annotation {key}; known: {', '.join(policies)}"
        parts.append(name or default)
    split = cache[asked] = SplitPolicy(policies[parts[0]], policies[parts[1]])
    return split


def is_split(asked: str) -> bool:
    return SPLIT in asked
