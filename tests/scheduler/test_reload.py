"""Conf reload as Volcano's scheduler does it, with real files laid out as a kubelet lays out a
mounted ConfigMap (the file a symlink into `..data`, itself a symlink to a timestamped folder,
swapped atomically on update): a conf that checks clean replaces the framework between sessions
and keeps the cache; a conf with errors is refused with a log line and a Warning Event, once, and
the running conf stays."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, LeaderElection, SchedulerConfig, build_scheduler
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache.objects import assignment_of
from runtimekit.scheduler.framework import BuildContext
from runtimekit.scheduler.framework.check import Checked, check_conf
from runtimekit.scheduler.reload import ConfWatcher
from runtimekit.scheduler.server import Scheduler
from scheduler.helpers import gpu_node

P = KitProtocol.default()
KEY = "volcano-scheduler.conf"


def conf(policy: str) -> str:
    return (
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n  - name: gpushare\n'
        f"    arguments: {{gpushare.policy: {policy}}}\n"
    )


BAD = 'actions: "allocate, shufle"\ntiers:\n- plugins:\n  - name: gpushare\n    arguments: {gpushare.policy: x}\n'


class MountedConfigMap:
    """A folder as the kubelet keeps a ConfigMap volume: `KEY -> ..data/KEY`, `..data -> ..<version>`."""

    def __init__(self, folder: Path, text: str | bytes) -> None:
        self.folder, self.version = folder, 0
        self._write(text)
        (folder / KEY).symlink_to(Path("..data") / KEY)

    @property
    def path(self) -> Path:
        return self.folder / KEY

    def _write(self, text: str | bytes) -> None:
        self.version += 1
        data = self.folder / f"..2026_11_30_00_00_0{self.version}.{self.version}"
        data.mkdir()
        (data / KEY).write_bytes(text.encode() if isinstance(text, str) else text)
        tmp = self.folder / "..data_tmp"
        tmp.symlink_to(data.name)
        os.replace(tmp, self.folder / "..data")  # the atomic swap

    def update(self, text: str | bytes) -> None:
        old = (self.folder / "..data").resolve()
        self._write(text)
        for file in old.iterdir():
            file.unlink()
        old.rmdir()


def checker() -> Any:
    registry, context = builtin_registry(), BuildContext(protocol=P)
    return lambda text, source: check_conf(text, source, registry, context)


def test_a_configmap_update_is_seen_through_the_symlink_swap(tmp_path: Path) -> None:
    mounted = MountedConfigMap(tmp_path, conf("bestfit"))
    applied: list[Checked] = []
    refused: list[Checked] = []
    watcher = ConfWatcher(mounted.path, checker(), applied.append, refused.append)
    assert watcher.poll() is None  # nothing changed
    mounted.update(conf("spread"))
    assert watcher.poll() == "waiting"  # a change is acted on once it reads the same twice
    assert watcher.poll() == "applied"
    (checked,) = applied
    assert checked.framework is not None
    assert checked.framework.conf.tiers[0].plugins[1].arguments == {"gpushare.policy": "spread"}
    assert watcher.poll() is None


def test_a_bad_conf_is_refused_once_and_a_good_one_after_it_applies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mounted = MountedConfigMap(tmp_path, conf("bestfit"))
    applied: list[Checked] = []
    refused: list[Checked] = []
    watcher = ConfWatcher(mounted.path, checker(), applied.append, refused.append)
    mounted.update(BAD)
    with caplog.at_level(logging.ERROR):
        assert [watcher.poll(), watcher.poll()] == ["waiting", "refused"]
    (checked,) = refused
    assert len(checked.problems.errors) == 2  # both errors, not the first only
    logged = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(logged) == 2
    assert "unknown action 'shufle'" in logged[0]
    assert watcher.poll() is None  # the same bytes are not refused again
    mounted.update(conf("spread"))
    assert [watcher.poll(), watcher.poll()] == ["waiting", "applied"]
    assert (watcher.reloads, watcher.refusals, len(applied)) == (1, 1, 1)


def test_a_check_that_raises_is_a_refusal_naming_the_exception(tmp_path: Path) -> None:
    def broken(text: str, source: str) -> Checked:
        raise KeyError("a plugin's bug")

    mounted = MountedConfigMap(tmp_path, conf("bestfit"))
    refused: list[Checked] = []
    watcher = ConfWatcher(mounted.path, broken, lambda c: pytest.fail("applied"), refused.append)
    mounted.update(conf("spread"))
    assert [watcher.poll(), watcher.poll(), watcher.poll()] == ["waiting", "refused", None]
    (checked,) = refused
    assert [p.message for p in checked.problems.errors] == [
        f'{mounted.path}: checking it failed: KeyError: "a plugin\'s bug"'
    ]


def test_an_edit_in_place_with_the_same_bytes_is_no_reload(tmp_path: Path) -> None:
    path = tmp_path / "plain.conf"
    path.write_text(conf("bestfit"))
    watcher = ConfWatcher(path, checker(), lambda c: pytest.fail("reloaded"), lambda c: pytest.fail("refused"))
    os.utime(path, ns=(1, 1))
    path.write_text(conf("bestfit"))
    assert watcher.poll() is None


def share_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": P.scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "resources": {"limits": {P.resources.core: 10, P.resources.memory: 1}, "requests": {"cpu": "1"}},
                }
            ],
        },
    }


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    yield client
    client.close()


def start(http: KubeHttp, path: Path, election: LeaderElection | None = None, allow: bool = False) -> Scheduler:
    config = SchedulerConfig(
        kube=http,
        conf=path,
        reload_conf=True,
        allow_conf_without_gpu_plugin=allow,
        protocol=P,
        keys=AssignmentKeys(required=False),
        leader_election=election or LeaderElection(),
        period=0.02,
        conf_poll=0.05,
    )
    scheduler = build_scheduler(config).start()
    assert scheduler.synced(10)
    return scheduler


def policy_of(http: KubeHttp, name: str) -> str | None:
    obj = http.get(f"/api/v1/namespaces/default/pods/{name}")
    assignment = assignment_of(obj, P) if obj["spec"].get("nodeName") else None
    return assignment.policy if assignment is not None else None


def events(http: KubeHttp, namespace: str, reason: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = http.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return [e for e in items if e["reason"] == reason]


def test_the_live_scheduler_reloads_between_sessions_and_refuses_a_bad_conf(
    http: KubeHttp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POD_NAME", "volcano-scheduler-0")
    monkeypatch.setenv("POD_NAMESPACE", "default")
    http.post("/api/v1/nodes", gpu_node("n1", 2))
    mounted = MountedConfigMap(tmp_path, conf("bestfit"))
    scheduler = start(http, mounted.path)
    cache = scheduler.cache
    try:
        http.post("/api/v1/namespaces/default/pods", share_pod("before"))
        wait_for(lambda: policy_of(http, "before") == "bestfit", what="bound under bestfit")
        first = scheduler.framework
        mounted.update(conf("spread"))
        wait_for(lambda: scheduler.framework is not first, what="the reloaded framework in use")
        http.post("/api/v1/namespaces/default/pods", share_pod("after"))
        wait_for(lambda: policy_of(http, "after") == "spread", what="bound under spread")
        assert scheduler.cache is cache
        assert len(cache.running) == 2

        reloaded = scheduler.framework
        mounted.update(BAD)
        (event,) = wait_for(lambda: events(http, "default", "SchedulerConfRefused"), what="the Warning Event")
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "Pod"
        assert event["involvedObject"]["name"] == "volcano-scheduler-0"
        assert "unknown action 'shufle'" in event["message"]
        assert "unknown policy 'x'" in event["message"]
        assert scheduler.framework is reloaded  # the running conf stays
        http.post("/api/v1/namespaces/default/pods", share_pod("still"))
        wait_for(lambda: policy_of(http, "still") == "spread", what="still bound under spread")
        assert scheduler.conf_reloads.get("applied") == 1
        assert scheduler.conf_reloads.get("refused") == 1
        assert scheduler.conf_ok.get() == 0
    finally:
        scheduler.stop()


def test_without_a_pod_the_refusal_goes_on_the_lease(
    http: KubeHttp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POD_NAME", raising=False)
    mounted = MountedConfigMap(tmp_path, conf("bestfit"))
    scheduler = start(http, mounted.path, LeaderElection(True, "default", "volcano"))
    try:
        mounted.update(BAD)
        (event,) = wait_for(lambda: events(http, "default", "SchedulerConfRefused"), what="the Warning Event")
        involved = event["involvedObject"]
        assert (involved["kind"], involved["name"], involved["apiVersion"]) == (
            "Lease",
            "volcano",
            "coordination.k8s.io/v1",
        )
    finally:
        scheduler.stop()


def test_a_reloaded_conf_with_the_pdb_and_resourcequota_plugins_starts_watching_what_they_read(
    http: KubeHttp, tmp_path: Path
) -> None:
    mounted = MountedConfigMap(tmp_path, conf("bestfit"))
    scheduler = start(http, mounted.path)
    try:
        assert not {"pdbs", "resourcequotas"} & {i.name for i in scheduler.informers}
        first = scheduler.framework
        mounted.update(
            conf("bestfit").replace("- plugins:\n", "- plugins:\n  - name: pdb\n  - name: resourcequota\n", 1)
        )
        wait_for(lambda: scheduler.framework is not first, what="the reloaded framework in use")
        watching = {i.name: i for i in scheduler.informers}
        assert {"pdbs", "resourcequotas"} <= set(watching)
        budget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
        http.post("/apis/policy/v1/namespaces/default/poddisruptionbudgets", budget)
        wait_for(lambda: "default/web" in scheduler.cache.budgets, what="the budget in the cache")
        quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "default"},
                 "spec": {"hard": {"cpu": "2"}}}  # fmt: skip
        http.post("/api/v1/namespaces/default/resourcequotas", quota)
        wait_for(lambda: "default/q" in scheduler.cache.quotas, what="the quota in the cache")
    finally:
        scheduler.stop()


# A valid conf that the YAML reader could not read (RecursionError), and one that is not UTF-8 (a
# comment with two stray bytes): both used to be neither applied nor refused.
DEEP = conf("spread") + "configurations:\n- name: allocate\n  arguments: {x: " + "[" * 50_000 + "]" * 50_000 + "}\n"
NOT_UTF8 = conf("spread").encode() + b"# \xff\xfe\n"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param(DEEP, "line 9: lists and mappings nested deeper than 100 levels", id="50,000 deep"),
        pytest.param(NOT_UTF8, f"not UTF-8 text (byte 0xff at offset {len(conf('spread')) + 2})", id="not UTF-8"),
    ],
)
def test_an_unreadable_conf_is_refused_with_an_event_and_a_count_and_the_running_conf_stays(
    http: KubeHttp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str | bytes, reason: str
) -> None:
    monkeypatch.setenv("POD_NAME", "volcano-scheduler-0")
    monkeypatch.setenv("POD_NAMESPACE", "default")
    http.post("/api/v1/nodes", gpu_node("n1", 2))
    mounted = MountedConfigMap(tmp_path, conf("bestfit"))
    scheduler = start(http, mounted.path)
    try:
        running = scheduler.framework
        mounted.update(content)
        (event,) = wait_for(lambda: events(http, "default", "SchedulerConfRefused"), what="the Warning Event")
        assert event["type"] == "Warning"
        assert event["involvedObject"]["name"] == "volcano-scheduler-0"
        assert reason in event["message"]
        assert (scheduler.conf_reloads.get("refused"), scheduler.conf_ok.get()) == (1, 0)
        assert scheduler.framework is running
        http.post("/api/v1/namespaces/default/pods", share_pod("still"))
        wait_for(lambda: policy_of(http, "still") == "bestfit", what="still bound under bestfit")
        assert scheduler.conf_reloads.get("applied") is None  # never counted
    finally:
        scheduler.stop()


NO_GPU_PLUGIN = 'actions: "allocate"\ntiers: null\n'


def test_a_conf_without_the_gpu_plugin_is_refused_while_gpu_pods_exist(
    http: KubeHttp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POD_NAME", "volcano-scheduler-0")
    monkeypatch.setenv("POD_NAMESPACE", "default")
    http.post("/api/v1/nodes", gpu_node("n1", 2))
    mounted = MountedConfigMap(tmp_path, conf("bestfit"))
    scheduler = start(http, mounted.path)
    try:
        http.post("/api/v1/namespaces/default/pods", share_pod("running"))
        wait_for(lambda: policy_of(http, "running") == "bestfit", what="bound under bestfit")
        running = scheduler.framework
        mounted.update(NO_GPU_PLUGIN)
        (event,) = wait_for(lambda: events(http, "default", "SchedulerConfRefused"), what="the Warning Event")
        assert event["type"] == "Warning"
        message = event["message"]
        assert f"no plugin would allocate GPU shares ({P.resources.core}, {P.resources.memory}) any more" in message
        assert "1 pod(s) ask for them (default/running)" in message
        assert "--allow-conf-without-gpu-plugin" in message
        assert scheduler.conf_reloads.get("refused") == 1
        assert scheduler.framework is running
        http.post("/api/v1/namespaces/default/pods", share_pod("still"))
        wait_for(lambda: policy_of(http, "still") == "bestfit", what="still bound under bestfit")
    finally:
        scheduler.stop()


@pytest.mark.parametrize(
    ("allow", "gpu_pod"),
    [pytest.param(True, True, id="opted in"), pytest.param(False, False, id="no GPU pod")],
)
def test_a_conf_without_the_gpu_plugin_applies_when_opted_in_or_when_no_pod_asks_for_gpus(
    http: KubeHttp, tmp_path: Path, allow: bool, gpu_pod: bool
) -> None:
    http.post("/api/v1/nodes", gpu_node("n1", 2))
    mounted = MountedConfigMap(tmp_path, conf("bestfit"))
    scheduler = start(http, mounted.path, allow=allow)
    try:
        if gpu_pod:
            http.post("/api/v1/namespaces/default/pods", share_pod("running"))
            wait_for(lambda: policy_of(http, "running") == "bestfit", what="bound under bestfit")
        running = scheduler.framework
        mounted.update(NO_GPU_PLUGIN)
        wait_for(lambda: scheduler.framework is not running, what="the reloaded framework in use")
        assert not scheduler.framework.plugins.allocate_devices.flat
        assert (scheduler.conf_reloads.get("applied"), scheduler.conf_reloads.get("refused")) == (1, None)
    finally:
        scheduler.stop()
