"""The CronJob controller against the embedded API server, on an injected clock (no test waits for
a schedule): Jobs at each run, kube's Job names and annotation, status (active, lastScheduleTime,
lastSuccessfulTime), concurrency policies, suspend, starting deadlines, history limits, time zones;
`kubectl create job --from=cronjob/x` with the real kubectl."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from fixtures.apiserver import Kubectl
from fixtures.waiting import wait_for
from runtimekit.base.timestamps import parse_rfc3339, rfc3339
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.controllers.cronjobs import CronJobController
from runtimekit.cluster.controllers.manager import ControllerManager
from runtimekit.kube.http import KubeHttp

NS = "default"
CRONJOBS = f"/apis/batch/v1/namespaces/{NS}/cronjobs"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"


@dataclass
class Clock:
    now: float

    def __call__(self) -> float:
        return self.now


@dataclass
class Crons:
    http: KubeHttp
    clock: Clock
    controller: CronJobController

    def make(self, name: str, schedule: str = "*/5 * * * *", **spec: Any) -> dict[str, Any]:
        body = {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": name},
            "spec": {
                "schedule": schedule,
                "jobTemplate": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}
                    },
                },
                **spec,
            },
        }
        made: dict[str, Any] = self.http.post(CRONJOBS, body)
        return made

    def at(self, epoch: float, name: str) -> None:
        """Move the clock and have the controller look at `name` again (as its timer would)."""
        self.clock.now = epoch
        self.controller.queue.add(f"{NS}/{name}")

    def jobs(self) -> list[dict[str, Any]]:
        return sorted(self.http.list(JOBS)[0], key=lambda j: j["metadata"]["name"])

    def status(self, name: str) -> dict[str, Any]:
        got: dict[str, Any] = self.http.get(f"{CRONJOBS}/{name}").get("status") or {}
        return got

    def events(self, name: str) -> list[str]:
        found = self.http.list(f"/api/v1/namespaces/{NS}/events", {"fieldSelector": f"involvedObject.name={name}"})[0]
        return [e["reason"] for e in found]

    def finish(self, job: dict[str, Any], outcome: str, at: float) -> None:
        condition = {"type": outcome, "status": "True", "lastTransitionTime": rfc3339(at)}
        status = {"conditions": [condition], "startTime": rfc3339(at - 1)}
        if outcome == "Complete":
            status["completionTime"] = rfc3339(at)
        self.http.patch(f"{JOBS}/{job['metadata']['name']}/status", {"status": status}, "merge")


@pytest.fixture
def crons(apiserver: ApiServer) -> Iterator[Crons]:
    clock = Clock(time.time())
    made: list[CronJobController] = []

    def factory(http: KubeHttp, informers: Any) -> CronJobController:
        made.append(CronJobController(http, informers, clock))
        return made[0]

    manager = ControllerManager(KubeHttp.connect(server=apiserver.url), [factory]).start()
    assert manager.synced(20)
    http = KubeHttp.connect(server=apiserver.url)
    yield Crons(http, clock, made[0])
    manager.stop()
    http.close()


def next_five(after: float) -> float:
    return math.floor(after / 300 + 1) * 300


def test_a_job_at_each_run_with_kubes_name_and_status(crons: Crons) -> None:
    crons.make("backup")
    run = next_five(crons.clock.now)
    crons.at(run - 30, "backup")
    time.sleep(0.3)
    assert crons.jobs() == []  # not yet due
    crons.at(run + 5, "backup")
    [job] = wait_for(lambda: crons.jobs() or None, what="the first job")
    assert job["metadata"]["name"] == f"backup-{int(run // 60)}"
    assert job["metadata"]["labels"]["app"] == "backup"
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == rfc3339(run)
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    status = wait_for(lambda: crons.status("backup").get("active") and crons.status("backup"), what="status")
    assert parse_rfc3339(status["lastScheduleTime"]) == run
    assert [a["name"] for a in status["active"]] == [job["metadata"]["name"]]
    assert "SuccessfulCreate" in crons.events("backup")

    crons.finish(job, "Complete", run + 60)
    done = wait_for(lambda: "lastSuccessfulTime" in crons.status("backup") and crons.status("backup"), what="done")
    assert "active" not in done
    assert parse_rfc3339(done["lastSuccessfulTime"]) == run + 60
    wait_for(lambda: "SawCompletedJob" in crons.events("backup"), what="the SawCompletedJob event")

    crons.at(run + 300 + 5, "backup")  # Allow: the next run starts whatever runs
    wait_for(lambda: len(crons.jobs()) == 2, what="the second job")


def test_forbid_skips_a_run_while_a_job_is_active_and_replace_replaces_it(crons: Crons) -> None:
    crons.make("forbid", concurrencyPolicy="Forbid")
    crons.make("replace", concurrencyPolicy="Replace")
    run = next_five(crons.clock.now)
    for name in ("forbid", "replace"):
        crons.at(run + 5, name)
    wait_for(lambda: len(crons.jobs()) == 2, what="one job each")
    for name in ("forbid", "replace"):
        crons.at(run + 305, name)
    wait_for(lambda: "JobAlreadyActive" in crons.events("forbid"), what="forbid skips")
    names = wait_for(
        lambda: (
            (n := [j["metadata"]["name"] for j in crons.jobs() if j["metadata"]["name"].startswith("replace")])
            == [f"replace-{int((run + 300) // 60)}"]
            and n
        ),
        what="the replaced job",
    )
    assert names
    assert [j["metadata"]["name"] for j in crons.jobs() if j["metadata"]["name"].startswith("forbid")] == [
        f"forbid-{int(run // 60)}"
    ]


def test_suspend_and_starting_deadline(crons: Crons) -> None:
    crons.make("paused", suspend=True)
    crons.make("late", startingDeadlineSeconds=10)
    run = next_five(crons.clock.now)
    crons.at(run + 5, "paused")
    crons.at(run + 120, "late")  # two minutes late, ten seconds allowed: kube looks back no further
    wait_for(lambda: "lastScheduleTime" not in crons.status("late") and len(crons.controller.queue) == 0, what="a look")
    time.sleep(0.5)
    assert crons.jobs() == []
    crons.at(run + 300 + 3, "late")
    wait_for(lambda: len(crons.jobs()) == 1, what="a run within the deadline")


def test_history_limits_delete_the_oldest_finished_jobs(crons: Crons) -> None:
    crons.make("hist", successfulJobsHistoryLimit=1, failedJobsHistoryLimit=0)
    run = next_five(crons.clock.now)
    for i, outcome in enumerate(("Complete", "Complete", "Failed")):
        at = run + 300 * i + 5
        crons.at(at, "hist")
        job = wait_for(
            lambda at=at: next(
                (j for j in crons.jobs() if j["metadata"]["name"] == f"hist-{int((at - 5) // 60)}"), None
            ),
            what=f"job {i}",
        )
        crons.finish(job, outcome, at + 10)
    crons.at(run + 600 + 30, "hist")
    kept = wait_for(lambda: len(crons.jobs()) == 1 and crons.jobs(), what="one job kept")
    assert kept[0]["metadata"]["name"] == f"hist-{int((run + 300) // 60)}"  # the newest successful one


def test_time_zone_and_descriptors(crons: Crons) -> None:
    crons.make("tokyo", schedule="0 9 * * *", timeZone="Asia/Tokyo")
    nine_tokyo = next(
        t
        for t in range(int(crons.clock.now // 3600 + 1) * 3600, int(crons.clock.now) + 2 * 86400, 3600)
        if time.gmtime(t).tm_hour == 0
    )
    crons.at(nine_tokyo + 5, "tokyo")
    [job] = wait_for(lambda: crons.jobs() or None, what="the 09:00 Tokyo job")
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"].endswith("09:00:00+09:00")


def test_kubectl_create_job_from_a_cronjob(crons: Crons, kubectl: Kubectl) -> None:
    crons.make("nightly", schedule="@daily")
    kubectl("create", "job", "by-hand", "--from=cronjob/nightly")
    job = json.loads(kubectl("get", "job", "by-hand", "-o", "json").stdout)
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert job["metadata"]["ownerReferences"][0]["name"] == "nightly"
    shown = kubectl("get", "cronjob", "nightly").stdout
    assert "@daily" in shown
