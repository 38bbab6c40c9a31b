"""The configuration of extender mode: the extender's own default conf (the GPU plugins alone), and
the `KubeSchedulerConfiguration` (`kubescheduler.config.k8s.io/v1`) that wires the extender into a
kube-scheduler. `runtimekit extender --print-kube-scheduler-config` prints it; deploy/ and the Helm
chart ship it (tests/deploy compare them with this module's text).

The kube-scheduler profile answers to the protocol's scheduler name, so pods that name the kit's
scheduler run unchanged in both modes. Its scoring leaves out NodeResourcesFit and
NodeResourcesBalancedAllocation, which spread pods by CPU and memory (the kit's default conf
weighs them 0 as well); the extender's weight (100) makes its first choice win over what
kube-scheduler still scores (taints, affinities, spread, image locality), which orders the nodes
the extender scores alike.
"""

from __future__ import annotations

from typing import Any

import yaml

from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.extender.interest import managed_resources

DEFAULT_LISTEN = ":8888"
DEFAULT_URL_PREFIX = "/lj-runtimekit"
DEFAULT_WEIGHT = 100
DEFAULT_HTTP_TIMEOUT = "10s"  # a bind waits for the API server; kube-scheduler's default is 5s

EXTENDER_CONF_TEXT = """\
# The extender's conf: the kit's GPU plugins only. kube-scheduler filters and scores everything else
# (resources, affinity, taints, spread, volumes) and asks the extender about the GPUs. No actions
# run: kube-scheduler decides when a pod is scheduled.
actions: "allocate"
tiers:
- plugins:
  - name: gpushare
    arguments:
      gpushare.policy: packfrag
  - name: mig
"""


def kube_scheduler_config(
    protocol: KitProtocol,
    url: str,
    *,
    node_cache_capable: bool = True,
    weight: int = DEFAULT_WEIGHT,
    leader_elect: bool = True,
    lease_namespace: str = "kube-system",
    lease_name: str = "lj-runtimekit-kube-scheduler",
) -> dict[str, Any]:
    """kube-scheduler's configuration with the extender at `url` (its urlPrefix)."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {
            "leaderElect": leader_elect,
            "resourceNamespace": lease_namespace,
            "resourceName": lease_name,
        },
        "profiles": [
            {
                "schedulerName": protocol.scheduler_name,
                "plugins": {
                    "score": {"disabled": [{"name": "NodeResourcesFit"}, {"name": "NodeResourcesBalancedAllocation"}]}
                },
            }
        ],
        "extenders": [
            {
                "urlPrefix": url,
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "bindVerb": "bind",
                "preemptVerb": "preempt",
                "weight": weight,
                "enableHTTPS": False,
                "httpTimeout": DEFAULT_HTTP_TIMEOUT,
                "nodeCacheCapable": node_cache_capable,
                "ignorable": False,
                "managedResources": [
                    {"name": name, "ignoredByScheduler": True} for name in managed_resources(protocol)
                ],
            }
        ],
    }


def kube_scheduler_config_text(protocol: KitProtocol, url: str, **options: Any) -> str:
    """`kube_scheduler_config` as YAML, keys in the order written above."""
    return yaml.safe_dump(kube_scheduler_config(protocol, url, **options), sort_keys=False)
