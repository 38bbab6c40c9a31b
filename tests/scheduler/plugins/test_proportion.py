"""`proportion` over every resource dimension, MIG slices and extended resources included (Volcano's
ScalarResources): a queue whose pods ask only for such resources still deserves them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from runtimekit.model import ContainerGpuRequest, GpuKind, GpuRequest, PodKey, PodRequest
from runtimekit.scheduler.framework.info import JobInfo, JobKey, QueueInfo, Resources, TaskInfo
from runtimekit.scheduler.plugins.drf import dominant_share
from runtimekit.scheduler.plugins.proportion import Proportion

SLICE = "aliyun.com/mig-1g.10gb"


def mig_only() -> PodRequest:
    """A pod asking one MIG slice and no CPU or memory (as HAMi's MIG example)."""
    return PodRequest(0, 0, (ContainerGpuRequest("main", GpuRequest(GpuKind.MIG, 1, 0, None, "1g.10gb", SLICE)),))


def opened(total: Resources, *requests: PodRequest, allocated: Resources | None = None) -> Proportion:
    job = JobInfo(JobKey("j"), "default", "j")
    for i, request in enumerate(requests):
        job.add(TaskInfo(PodKey(f"p{i}"), "default", f"p{i}", job.key, request))
    snapshot = SimpleNamespace(capacity=total, queue_allocated={"default": allocated or Resources()})
    ssn = SimpleNamespace(snapshot=snapshot, jobs={job.key: job}, queues={"default": QueueInfo("default")})
    plugin = Proportion()
    plugin.on_session_open(ssn)
    return plugin


def test_a_queue_asking_only_for_mig_slices_deserves_them_and_is_not_overused() -> None:
    plugin = opened(Resources(128_000, 10**6, 0, ((SLICE, 56),)), mig_only(), mig_only())
    assert plugin.attrs["default"].deserved == Resources(0, 0, 0, ((SLICE, 2),))
    assert not plugin.overused(QueueInfo("default"))


def test_the_queue_is_overused_once_it_holds_every_slice_its_pods_ask() -> None:
    total = Resources(128_000, 10**6, 0, ((SLICE, 56),))
    assert opened(total, allocated=Resources(0, 0, 0, ((SLICE, 1),))).overused(QueueInfo("default"))
    assert not opened(total, mig_only(), allocated=Resources(0, 0, 0, ((SLICE, 1),))).overused(QueueInfo("default"))


@pytest.mark.parametrize(
    ("used", "share"),
    [
        pytest.param(Resources(0, 0, 0, ((SLICE, 7),)), 0.5, id="half of the slices"),
        pytest.param(Resources(64_000, 0, 0, ((SLICE, 1),)), 0.5, id="half of the CPUs"),
    ],
)
def test_the_dominant_share_counts_scalar_dimensions(used: Resources, share: float) -> None:
    assert dominant_share(used, Resources(128_000, 10**6, 0, ((SLICE, 14),))) == share
