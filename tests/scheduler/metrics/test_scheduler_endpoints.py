"""The live scheduler's `/metrics` and `/healthz` against the embedded API server: Volcano's metric
families under their names, labels and bucket bounds after real scheduling, checked by the real
promtool and scraped by a real Prometheus answering the queries of Volcano's Grafana dashboard;
the kit's GPU figures; health as Kubernetes components answer it, leader-aware.

Volcano facts used: the family names and labels of pkg/scheduler/metrics (metrics.go, queue.go,
job.go) and of its queue controller's metrics; the expressions of the dashboard in its Helm chart
(templates/grafana.yaml)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, Endpoints, LeaderElection, SchedulerConfig, build_scheduler
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.metrics.series import E2E_BUCKETS, go_float
from runtimekit.scheduler.server import Scheduler
from scheduler.helpers import gpu_node

P = KitProtocol.default()
ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / ".tools" / "bin"
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: gpushare
    arguments: {gpushare.policy: bestfit}
"""
# What promtool's linter says of Volcano's own names (milliseconds, counters without _total, gauges
# ending in _count, a camelCase label): the only problems allowed. Anything else is ours to fix.
VOLCANO_LINT = re.compile(
    r'^volcano_\w+ (use base unit "seconds" instead of "milliseconds"'
    r'|counter metrics should have "_total" suffix'
    r'|non-histogram and non-summary metrics should not have "_count" suffix'
    r"|label names should be written in 'snake_case' not 'camelCase')$"
)


def tool(name: str) -> Path:
    path = TOOLS / name
    if not path.exists():
        pytest.skip(f"{name} not fetched (make tools)")
    return path


def pod(name: str, limits: dict[str, Any]) -> dict[str, Any]:
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
                    "resources": {"limits": limits, "requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    yield client
    client.close()


def start(
    http: KubeHttp, retry_seconds: float = SchedulerConfig.retry_seconds, election: LeaderElection | None = None
) -> Scheduler:
    config = SchedulerConfig(
        kube=http,
        conf=parse_conf(CONF),
        protocol=P,
        keys=AssignmentKeys(required=False),
        leader_election=election or LeaderElection(),
        endpoints=Endpoints(healthz="localhost:0", metrics="127.0.0.1:0"),
        period=0.02,
        retry_seconds=retry_seconds,
    )
    scheduler = build_scheduler(config).start()
    assert scheduler.synced(10)
    return scheduler


def url(scheduler: Scheduler, which: int, path: str) -> str:
    """The address of the scheduler's `which` endpoint: 0 /healthz, 1 /metrics (as `start` sets them)."""
    return f"http://{scheduler.endpoints[which].address}{path}"


def metric_lines(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{") or line.startswith(name + " ")]


def value(text: str, series: str) -> float:
    (line,) = [line for line in text.splitlines() if line.rsplit(" ", 1)[0] == series]
    return float(line.rsplit(" ", 1)[1])


@pytest.fixture
def scheduled(http: KubeHttp) -> Iterator[tuple[Scheduler, str]]:
    """A scheduler that bound a share and a whole GPU and failed a pod too big for any node."""
    http.post("/api/v1/nodes", gpu_node("n1", 2))
    scheduler = start(http, retry_seconds=0.5)  # toobig is retried: sessions go on, so rates are not 0
    try:
        http.post("/api/v1/namespaces/default/pods", pod("frac", {P.resources.core: 25, P.resources.memory: 20}))
        http.post("/api/v1/namespaces/default/pods", pod("whole", {P.resources.gpu: 1}))
        http.post("/api/v1/namespaces/default/pods", pod("toobig", {P.resources.gpu: 4}))
        metrics_url = url(scheduler, 1, "/metrics")

        def settled() -> str | None:
            text = httpx2.get(metrics_url, timeout=10).text
            done = 'volcano_schedule_attempts_total{result="scheduled"} 2' in text
            return text if done and 'volcano_schedule_attempts_total{result="unschedulable"}' in text else None

        wait_for(settled, what="two pods bound and one failed")
        yield scheduler, metrics_url
    finally:
        scheduler.stop()


def test_volcanos_families_after_real_scheduling(scheduled: tuple[Scheduler, str]) -> None:
    _, metrics_url = scheduled
    response = httpx2.get(metrics_url, timeout=10)
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    for name in (
        "volcano_e2e_scheduling_latency_milliseconds_bucket",
        "volcano_open_session_duration_milliseconds_bucket",
        "volcano_e2e_job_scheduling_latency_milliseconds_bucket",
        "volcano_e2e_job_scheduling_duration",
        "volcano_e2e_job_scheduling_start_time",
        "volcano_e2e_job_scheduling_last_time",
        "volcano_unschedule_task_count",
        "volcano_unschedule_job_count",
        "volcano_total_preemption_attempts",
        "volcano_pod_preemption_victims",
        "volcano_queue_allocated_milli_cpu",
        "volcano_queue_deserved_memory_bytes",
        "volcano_queue_request_scalar_resources",
        "volcano_queue_share",
        "volcano_queue_weight",
        "volcano_queue_overused",
        "volcano_queue_pod_group_running_count",
        "runtimekit_scheduler_gpus",
        "runtimekit_scheduler_gpu_fragmentation_ratio",
        "runtimekit_scheduler_decision_seconds_bucket",
        "process_cpu_seconds_total",
    ):
        assert metric_lines(text, name), name
    # Volcano's labels and label values
    assert 'volcano_action_scheduling_latency_milliseconds_count{action="allocate"}' in text
    assert 'volcano_plugin_scheduling_latency_milliseconds_count{plugin="gang",OnSession="OnSessionOpen"}' in text
    assert 'volcano_plugin_scheduling_latency_milliseconds_count{plugin="gpushare",OnSession="OnSessionClose"}' in text
    for stage in ("Watched", "Assumed", "Bound"):
        assert value(text, f'volcano_task_scheduling_latency_milliseconds_count{{stage="{stage}"}}') >= 2
    for stage in ("Predicate", "Bind"):
        assert value(text, f'volcano_scheduling_stage_duration_milliseconds_count{{stage="{stage}"}}') >= 2
    assert value(text, 'volcano_unschedule_task_count{job_id="toobig"}') == 1
    assert value(text, 'volcano_queue_allocated_milli_cpu{queue_name="default"}') == 2000
    assert (
        value(text, 'volcano_queue_allocated_scalar_resources{queue_name="default",resource="aliyun.com/gpu"}') == 1250
    )
    assert value(text, 'runtimekit_scheduler_gpus{state="shared"}') == 1
    assert value(text, 'runtimekit_scheduler_gpus{state="full"}') == 1
    assert value(text, 'runtimekit_scheduler_decision_seconds_count{policy="bestfit"}') == 2
    # the bucket bounds are Volcano's, written as Go writes them
    les = re.findall(r'volcano_e2e_scheduling_latency_milliseconds_bucket\{le="([^"]+)"\}', text)
    assert les == [go_float(b) for b in E2E_BUCKETS] + ["+Inf"]
    assert les[:3] == ["1", "1.5656065579430964", "2.45112389427443"]


def test_promtool_finds_nothing_but_volcanos_own_naming(scheduled: tuple[Scheduler, str]) -> None:
    _, metrics_url = scheduled
    text = httpx2.get(metrics_url, timeout=10).text
    done = subprocess.run(
        [str(tool("promtool")), "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    problems = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode in (0, 3), problems  # 3: lint problems only; a parse error is 1
    assert problems
    assert [p for p in problems if not VOLCANO_LINT.match(p)] == []
    assert not any(p.startswith("runtimekit_") for p in problems)


def test_a_real_prometheus_answers_volcanos_dashboard_queries(scheduled: tuple[Scheduler, str], tmp_path: Path) -> None:
    scheduler, _metrics_url = scheduled
    prometheus = start_prometheus(scheduler.endpoints[1].address, tmp_path)
    try:
        dashboard = [
            "histogram_quantile(0.95, sum(rate(volcano_e2e_scheduling_latency_milliseconds_bucket[5m])) by (le))",
            "histogram_quantile(0.95, sum(rate(volcano_action_scheduling_latency_milliseconds_bucket[5m]))"
            " by (le,action))",
            "histogram_quantile(0.95, sum(rate(volcano_plugin_scheduling_latency_milliseconds_bucket[5m]))"
            " by (le,plugin,OnSession))",
            "volcano_queue_allocated_milli_cpu",
            "volcano_queue_deserved_milli_cpu",
            "volcano_queue_share",
            "avg by (job_name) (volcano_e2e_job_scheduling_duration)",
            'volcano_queue_allocated_scalar_resources{resource="aliyun.com/gpu"}',
        ]
        for expr in dashboard:
            wait_for(lambda expr=expr: query(prometheus, expr), timeout=60, what=expr)
        allocated = {
            s["metric"]["queue_name"]: float(s["value"][1])
            for s in query(prometheus, "volcano_queue_allocated_milli_cpu")
        }
        assert allocated == {"default": 2000, "root": 0}
    finally:
        prometheus.terminate()
        prometheus.wait(10)


def start_prometheus(target: str, folder: Path) -> subprocess.Popen[bytes]:
    port = free_port()
    config = folder / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs:\n- job_name: volcano-scheduler\n  static_configs: [{{targets: ['{target}']}}]\n"
    )
    process = subprocess.Popen(
        [
            str(tool("prometheus")),
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    process.url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    return process


def query(prometheus: subprocess.Popen[bytes], expr: str) -> list[dict[str, Any]]:
    try:
        body = httpx2.get(f"{prometheus.url}/api/v1/query", params={"query": expr}, timeout=5).json()  # type: ignore[attr-defined]
    except (httpx2.HTTPError, ValueError):
        return []
    result: list[dict[str, Any]] = [r for r in body["data"]["result"] if r["value"][1] != "NaN"]
    return result


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_healthz_answers_as_kubernetes_components_do(scheduled: tuple[Scheduler, str]) -> None:
    scheduler, _ = scheduled
    health = url(scheduler, 0, "/healthz")
    assert httpx2.get(health, timeout=5).text == "ok"
    verbose = httpx2.get(health + "?verbose", timeout=5)
    assert verbose.text == "[+]ping ok\n[+]scheduler ok\nhealthz check passed\n"
    assert httpx2.get(health + "/ping", timeout=5).text == "ok"
    assert httpx2.get(health + "/nope", timeout=5).status_code == 404
    assert httpx2.get(url(scheduler, 0, "/metrics"), timeout=5).status_code == 404  # metrics on their own address


def test_healthz_is_leader_aware(http: KubeHttp) -> None:
    leader = start(http, election=LeaderElection(True, "default", identity="a"))
    standby = start(http, election=LeaderElection(True, "default", identity="b"))
    try:
        assert leader.elector is not None
        assert standby.elector is not None
        wait_for(leader.elector.leading.is_set, what="a leads")  # type: ignore[union-attr]
        for scheduler in (leader, standby):
            answer = httpx2.get(url(scheduler, 0, "/healthz?verbose"), timeout=5)
            assert answer.status_code == 200
            assert "[+]leaderElection ok" in answer.text
        elector = leader.elector
        elector.stop()  # a leader whose renewals stopped long ago (by its clock): unhealthy, so restarted
        elector.leading.set()
        renewed = elector.renewed_at
        elector.clock = lambda: renewed + elector.lease_seconds + 60
        answer = httpx2.get(url(leader, 0, "/healthz"), timeout=5)
        assert answer.status_code == 500
        assert "[-]leaderElection failed: the Lease was last renewed 60s past its duration" in answer.text
        assert answer.text.endswith("healthz check failed\n")
        assert httpx2.get(url(standby, 0, "/healthz"), timeout=5).text == "ok"
    finally:
        standby.stop()
        leader.stop()
