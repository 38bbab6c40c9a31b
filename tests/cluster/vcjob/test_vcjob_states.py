"""The Volcano Job state machine and lifecycle policies, with the cases of Volcano's job controller
tests (job_state_test.go, applyPolicies) and docs (how_to_use_job_policy.md) as data."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.cluster.vcjob import states
from runtimekit.cluster.vcjob.policies import Request, action_for, timeout_seconds


def spec(min_available: int = 3, replicas: tuple[int, ...] = (3,), max_retry: int = 3, **extra: Any) -> dict[str, Any]:
    tasks = [{"name": f"task{i + 1}", "replicas": r} for i, r in enumerate(replicas)]
    return {"minAvailable": min_available, "maxRetry": max_retry, "tasks": tasks, **extra}


@pytest.mark.parametrize(
    ("phase", "action", "how", "to"),
    [
        ("Pending", "RestartJob", states.KILL_ALL, "Restarting"),
        ("Pending", "AbortJob", states.KILL_SOFT, "Aborting"),
        ("Pending", "TerminateJob", states.KILL_SOFT, "Terminating"),
        ("Pending", "CompleteJob", states.KILL_SOFT, "Completing"),
        ("Pending", "RestartTask", states.KILL_TARGET, "Restarting"),
        ("Running", "RestartJob", states.KILL_ALL, "Restarting"),
        ("Running", "AbortJob", states.KILL_SOFT, "Aborting"),
        ("Running", "TerminateJob", states.KILL_SOFT, "Terminating"),
        ("Running", "CompleteJob", states.KILL_SOFT, "Completing"),
        ("Running", "RestartPod", states.KILL_TARGET, "Restarting"),
        ("Aborted", "ResumeJob", states.KILL_SOFT, "Restarting"),
        ("Aborting", "ResumeJob", states.KILL_SOFT, "Restarting"),
    ],
)
def test_actions_that_move_the_phase(phase: str, action: str, how: str, to: str) -> None:
    kill, update = states.plan(phase, action)
    assert kill == how
    assert update is not None
    status: dict[str, Any] = {"state": {"phase": phase}, "retryCount": 0}
    assert update(status, spec())
    assert status["state"]["phase"] == to
    assert status["retryCount"] == (1 if to == "Restarting" else 0)


@pytest.mark.parametrize(
    ("running", "succeeded", "failed", "to"),
    [(3, 0, 0, "Running"), (2, 0, 0, "Pending"), (1, 1, 1, "Running")],
    ids=["min available running", "not yet", "finished pods count"],
)
def test_pending_becomes_running_at_min_available(running: int, succeeded: int, failed: int, to: str) -> None:
    kill, update = states.plan("Pending", "SyncJob")
    assert kill == states.SYNC
    assert update is not None
    status = {"state": {"phase": "Pending"}, "running": running, "succeeded": succeeded, "failed": failed}
    update(status, spec())
    assert status["state"]["phase"] == to


@pytest.mark.parametrize(
    ("counts", "job", "to"),
    [
        ({"succeeded": 3}, spec(), "Completed"),
        ({"succeeded": 2, "failed": 1}, spec(min_available=2), "Completed"),
        ({"succeeded": 1, "failed": 2}, spec(min_available=2), "Failed"),
        ({"succeeded": 2, "running": 1}, spec(minSuccess=2), "Completed"),
        ({"succeeded": 1, "failed": 2}, spec(min_available=1, minSuccess=2), "Failed"),
        ({"running": 1, "pending": 2}, spec(min_available=2), "Pending"),
        ({"running": 2, "pending": 1}, spec(min_available=2), "Running"),
    ],
    ids=["all succeeded", "enough succeeded", "too many failed", "min success", "under min success", "back", "stays"],
)
def test_running_finishes_when_every_pod_did(counts: dict[str, int], job: dict[str, Any], to: str) -> None:
    _, update = states.plan("Running", "SyncJob")
    assert update is not None
    status: dict[str, Any] = {"state": {"phase": "Running"}, **counts}
    update(status, job)
    assert status["state"]["phase"] == to


def test_a_task_under_its_min_available_fails_the_job() -> None:
    job = spec(min_available=4, replicas=(2, 2))
    job["tasks"][0]["minAvailable"] = 2
    job["tasks"][1]["minAvailable"] = 2
    status = {
        "state": {"phase": "Running"},
        "succeeded": 3,
        "failed": 1,
        "taskStatusCount": {"task1": {"phase": {"Succeeded": 2}}, "task2": {"phase": {"Succeeded": 1, "Failed": 1}}},
    }
    _, update = states.plan("Running", "SyncJob")
    assert update is not None
    update(status, job)
    assert status["state"]["phase"] == "Failed"


@pytest.mark.parametrize(
    ("retries", "terminating", "to"),
    [(3, 0, "Failed"), (1, 0, "Pending"), (1, 2, "Restarting")],
    ids=["past max retry", "old pods gone", "old pods still going"],
)
def test_restarting(retries: int, terminating: int, to: str) -> None:
    kill, update = states.plan("Restarting", "SyncJob")
    assert kill == states.SYNC
    assert update is not None
    status = {"state": {"phase": "Restarting"}, "retryCount": retries, "terminating": terminating, "minAvailable": 1}
    update(status, spec(min_available=1, replicas=(1, 1)))
    assert status["state"]["phase"] == to


@pytest.mark.parametrize(
    ("phase", "to"), [("Aborting", "Aborted"), ("Completing", "Completed"), ("Terminating", "Terminated")]
)
def test_draining_phases_finish_once_no_pod_is_left_running(phase: str, to: str) -> None:
    kill, update = states.plan(phase, "SyncJob")
    assert kill == states.KILL_SOFT
    assert update is not None
    busy = {"state": {"phase": phase}, "running": 2}
    assert not update(busy, spec())
    assert busy["state"]["phase"] == phase
    done = {"state": {"phase": phase}, "succeeded": 3}
    assert update(done, spec())
    assert done["state"]["phase"] == to


@pytest.mark.parametrize("phase", ["Completed", "Failed", "Terminated", "Aborted"])
def test_finished_phases_only_tidy_up(phase: str) -> None:
    assert states.plan(phase, "RestartJob") == (states.KILL_SOFT, None)


# policies ---------------------------------------------------------------------------------------


def job_with(
    policies: list[dict[str, Any]], task_policies: list[dict[str, Any]] | None = None, version: int = 0
) -> dict[str, Any]:
    tasks = [{"name": "worker", "replicas": 2, "policies": task_policies or []}]
    return {"spec": {"policies": policies, "tasks": tasks}, "status": {"version": version}}


@pytest.mark.parametrize(
    ("job", "news", "expected"),
    [
        (
            job_with([{"event": "PodEvicted", "action": "RestartJob"}]),
            Request("j", "PodEvicted", "worker"),
            ("RestartJob", 0.0),
        ),
        (
            job_with([{"event": "PodEvicted", "action": "RestartJob"}]),
            Request("j", "PodFailed", "worker"),
            ("SyncJob", 0.0),
        ),
        (job_with([{"event": "*", "action": "AbortJob"}]), Request("j", "PodFailed", "worker"), ("AbortJob", 0.0)),
        (
            job_with([{"event": "PodFailed", "action": "AbortJob"}], [{"event": "PodFailed", "action": "RestartTask"}]),
            Request("j", "PodFailed", "worker"),
            ("RestartTask", 0.0),
        ),
        (
            job_with([{"events": ["PodEvicted", "PodFailed"], "action": "RestartJob"}]),
            Request("j", "PodFailed", "worker"),
            ("RestartJob", 0.0),
        ),
        (
            job_with([{"exitCode": 3, "action": "AbortJob"}]),
            Request("j", "PodFailed", "worker", exit_code=3),
            ("AbortJob", 0.0),
        ),
        (
            job_with([{"exitCode": 3, "action": "AbortJob"}]),
            Request("j", "PodFailed", "worker", exit_code=1),
            ("SyncJob", 0.0),
        ),
        (
            job_with([{"event": "PodPending", "action": "AbortJob"}]),
            Request("j", "PodPending", "worker"),
            ("SyncJob", 0.0),
        ),
        (
            job_with([{"event": "PodPending", "action": "AbortJob", "timeout": "5m"}]),
            Request("j", "PodPending", "worker"),
            ("AbortJob", 300.0),
        ),
        (job_with([{"event": "*", "action": "AbortJob"}]), Request("j", "PodRunning", "worker"), ("SyncJob", 0.0)),
        (
            job_with([{"event": "PodEvicted", "action": "RestartJob"}], version=2),
            Request("j", "PodEvicted", "worker", version=1),
            ("SyncJob", 0.0),
        ),
        (
            job_with([{"event": "TaskCompleted", "action": "CompleteJob"}]),
            Request("j", "TaskCompleted", "worker"),
            ("CompleteJob", 0.0),
        ),
    ],
    ids=[
        "evicted restarts",
        "other event syncs",
        "any event",
        "task policy first",
        "event list",
        "exit code",
        "other exit code",
        "pending needs a timeout",
        "pending with timeout",
        "internal event",
        "older job version",
        "task completed",
    ],
)
def test_policies_pick_the_action(job: dict[str, Any], news: Request, expected: tuple[str, float]) -> None:
    assert action_for(job, news) == expected


def test_go_durations() -> None:
    assert timeout_seconds("1m30s") == 90.0
    assert timeout_seconds("500ms") == 0.5
    assert timeout_seconds(None) == 0.0
