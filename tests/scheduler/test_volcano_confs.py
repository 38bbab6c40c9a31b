"""Volcano's own confs (its Helm chart's and those of its user guides, reproduced in volcano_confs/)
load here unchanged, with a warning for each thing that cannot mean anything here and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, Framework, load_conf, parse_conf
from runtimekit.scheduler.plugins.overcommit import Overcommit

CONFS = Path(__file__).parent / "volcano_confs"
# conf -> what its warnings name (one warning each)
EXPECTED: dict[str, list[str]] = {
    "helm-default.conf": [],
    "helm-agent.conf": [],
    "helm-ci.conf": ["'network-topology-aware'"],
    "helm-capacity-card-ci.conf": ["'capacity-card'", "'network-topology-aware'"],
    "helm-namespacequeue-ci.conf": ["'network-topology-aware'"],
    "guide-configure-scheduler.conf": [],
    "guide-dra.conf": [],
    "guide-capacity.conf": [],
    "guide-capacity-hierarchy.conf": [],
    "guide-cdp.conf": ["'cdp'", "'task-topology'"],
    "guide-dra-quota.conf": [],
    "guide-network-topology.conf": ["'network-topology-aware'"],
    "guide-resource-strategy-fit.conf": [],
    "guide-queue-admission.conf": [],
    "guide-task-topology.conf": ["'task-topology'"],
    "guide-vnpu-hami.conf": [
        "AscendHAMiVNPUEnable",
        "KnownGeometriesCMName ",
        "KnownGeometriesCMNamespace",
        "no device kind enabled",
    ],
    "guide-vnpu-mindcluster.conf": ["AscendMindClusterVNPUEnable", "no device kind enabled", "'init-params' is not in"],
    "guide-vgpu.conf": [],
    "guide-gpu-sharing.conf": [],
    "guide-gpu-sharing-v1.8.conf": ["predicate.GPUSharingEnable"],
    "guide-gpu-number.conf": [],
    "guide-gpu-number-v1.8.conf": ["predicate.GPUNumberEnable"],
    "guide-numa-aware.conf": ["'numa-aware'"],
    "guide-extender.conf": ["'extender'"],
    "guide-nodegroup-strict.conf": ["'nodegroup'"],
    "guide-nodegroup-hierarchy.conf": ["'nodegroup'"],
    "guide-tune-performance.conf": [],
}


def test_every_conf_of_the_folder_is_in_the_table() -> None:
    assert sorted(p.name for p in CONFS.glob("*.conf")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_volcanos_conf_loads_with_a_warning_for_each_thing_it_cannot_mean_here(name: str) -> None:
    framework = Framework(load_conf(CONFS / name), builtin_registry(), BuildContext())
    warnings = framework.warnings
    assert len(warnings) == len(EXPECTED[name]), warnings
    for expected in EXPECTED[name]:
        assert any(expected in w for w in warnings), (expected, warnings)
    assert framework.actions


@pytest.mark.parametrize("name", ["guide-dra.conf", "helm-ci.conf", "helm-capacity-card-ci.conf"])
def test_volcanos_dra_switch_runs_dynamicresources_after_predicates(name: str) -> None:
    """`predicate.DynamicResourceAllocationEnable: true` is how Volcano turns DRA on (kube's
    DynamicResources inside predicates): here the dynamicresources plugin runs right after predicates,
    so pods' ResourceClaims are allocated as in Volcano."""
    framework = Framework(load_conf(CONFS / name), builtin_registry(), BuildContext())
    names = [p.name for p in framework.plugins.predicate.flat]
    assert names[names.index("predicates") + 1] == "dynamicresources"
    assert "resourceclaims" in framework.watched


def test_volcanos_dra_quota_guide_conf_keeps_queue_quotas_of_claims() -> None:
    """The DRA quota guide's conf turns on the capacity plugin's DRA quotas: it reads pods' claims."""
    framework = Framework(load_conf(CONFS / "guide-dra-quota.conf"), builtin_registry(), BuildContext())
    assert "resourceclaims" in framework.watched


def test_gpu_sharing_confs_place_gpu_pods() -> None:
    """Volcano's GPU-sharing confs name deviceshare: here it places the pods (through gpushare)."""
    framework = Framework(load_conf(CONFS / "guide-vgpu.conf"), builtin_registry(), BuildContext())
    assert [p.name for p in framework.plugins.allocate_devices.flat] == ["deviceshare"]


def test_an_overcommit_factor_below_one_warns_and_takes_volcanos_default() -> None:
    """Volcano's overcommit plugin logs a factor below 1 and uses 1.2; a conf Volcano runs must run here."""
    conf = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: overcommit
    arguments:
      overcommit-factor: 0.5
"""
    framework = Framework(parse_conf(conf), builtin_registry(), BuildContext())
    (warning,) = framework.warnings
    assert "overcommit-factor 0.5 is below 1; using the default 1.2" in warning
    (plugin,) = framework.plugins.job_enqueueable.flat
    assert isinstance(plugin, Overcommit)
    assert plugin.args.overcommit_factor == 1.2


@pytest.mark.parametrize("name", ["capacity-card", "reservation", "devices"])
def test_every_plugin_volcano_has_shipped_is_skipped_with_a_warning(name: str) -> None:
    conf = f"""
actions: "allocate"
tiers:
- plugins:
  - name: priority
  - name: {name}
"""
    framework = Framework(parse_conf(conf), builtin_registry(), BuildContext())
    (warning,) = framework.warnings
    assert warning.endswith(f"({name}): plugin {name!r} is one of Volcano's but not built here; skipped")


def test_action_and_dra_arguments_of_newer_volcano_load() -> None:
    """Keys Volcano 1.12-1.16 reads that change nothing here are accepted, not refused: the DRA filter's
    timeout, the predicate-error cache of backfill and reclaim, preempt's worker count."""
    conf = """
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: true
      dynamicresources.filterTimeoutSeconds: 10
configurations:
- name: backfill
  arguments:
    predicateErrorCacheEnable: true
- name: reclaim
  arguments:
    predicateErrorCacheEnable: false
- name: preempt
  arguments:
    topologyAwarePreemptWorkerNum: 16
"""
    framework = Framework(parse_conf(conf), builtin_registry(), BuildContext())
    assert framework.warnings == []
    assert "dynamicresources" in [p.name for p in framework.plugins.predicate.flat]
    bad = conf.replace("filterTimeoutSeconds: 10", "filterTimeoutSeconds: -1")
    with pytest.raises(Exception, match="filterTimeoutSeconds must not be negative"):
        Framework(parse_conf(bad), builtin_registry(), BuildContext())


def test_a_volcano_1_5_conf_with_elect_and_reserve_loads_with_warnings() -> None:
    conf = """
actions: "enqueue, elect, allocate, backfill, reserve"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: reservation
"""
    framework = Framework(parse_conf(conf), builtin_registry(), BuildContext())
    assert framework.action_names == ("enqueue", "allocate", "backfill")
    assert len(framework.warnings) == 3, framework.warnings
    assert all(any(name in w for w in framework.warnings) for name in ("'elect'", "'reserve'", "'reservation'"))
