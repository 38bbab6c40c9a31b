"""The placement policies as callers outside the scheduler name them: the simulator's `--policy`
values, the default policy, and the target workload (FGD's pod types and their frequencies) that a
caller may hand the gpushare plugin instead of letting it learn one (`inprocess.FrameworkConfig`).

The policies themselves live with the plugin that runs them (`plugins/gpushare/policies/`); this is
the scheduler package's public face of them, so that the simulator and the command line import
nothing from `scheduler.plugins`.
"""

from __future__ import annotations

from runtimekit.scheduler.plugins.gpushare.policies import DEFAULT_POLICY, POLICIES, PodType, TargetWorkload

POLICY_NAMES: tuple[str, ...] = tuple(POLICIES)  # every placement policy, in the plugin's order

__all__ = ["DEFAULT_POLICY", "POLICY_NAMES", "PodType", "TargetWorkload"]
