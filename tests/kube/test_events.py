"""The event recorder writes Events off the caller's path, to a real (embedded) API server: each one once,
with the fields `kubectl describe` shows; a full queue drops and counts instead of blocking; an API error
is counted and the recorder keeps going; events over the rate limit are dropped and counted (and not built)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube import events as events_module
from runtimekit.kube.events import EventRecorder, TokenBucket, event_body, record_event
from runtimekit.kube.http import KubeHttp


@dataclass(frozen=True)
class Ref:
    namespace: str
    name: str
    uid: str = "uid-1"


def events(http: KubeHttp, namespace: str = "default") -> list[dict[str, object]]:
    return http.list(f"/api/v1/namespaces/{namespace}/events")[0]


def test_events_arrive_once_each_with_what_describe_shows(apiserver: ApiServer) -> None:
    http = KubeHttp.connect(server=apiserver.url)
    recorder = EventRecorder(http, "lj-runtimekit-scheduler")
    try:
        for i in range(50):
            recorder.record(Ref("default", f"p{i}"), "Normal", "Scheduled", f"assigned p{i} to n1")
        recorder.record(Ref("default", "big"), "Warning", "FailedScheduling", "x" * 5000)
        assert recorder.flush(30)
        found = events(http)
        assert sorted(e["involvedObject"]["name"] for e in found) == sorted([f"p{i}" for i in range(50)] + ["big"])
        big = next(e for e in found if e["involvedObject"]["name"] == "big")
        assert (big["type"], big["reason"], len(big["message"])) == ("Warning", "FailedScheduling", 1024)
        assert big["source"] == {"component": "lj-runtimekit-scheduler"}
        assert big["involvedObject"]["uid"] == "uid-1"
        assert recorder.dropped == recorder.failed == 0
    finally:
        recorder.close()
        http.close()


def test_a_full_queue_drops_and_an_api_error_is_counted(apiserver: ApiServer) -> None:
    http = KubeHttp.connect(server=apiserver.url)
    recorder = EventRecorder(http, "c", capacity=1, workers=1, qps=0)  # no rate limit: the queue drops
    try:
        for i in range(200):  # far faster than one worker can write them
            recorder.record(Ref("default", f"p{i}"), "Normal", "Scheduled", "m")
        assert recorder.dropped > 0
        assert recorder.flush(30)
        assert len(events(http)) + recorder.dropped == 200
        recorder.record(Ref("nosuchns", "p"), "Normal", "Scheduled", "m")  # the API server refuses it: 404
        assert recorder.flush(30)
        assert recorder.failed == 1
        recorder.record(Ref("default", "after"), "Normal", "Scheduled", "still writing")
        assert recorder.flush(30)
        assert any(e["involvedObject"]["name"] == "after" for e in events(http))
    finally:
        recorder.close()
        http.close()


def test_token_bucket_allows_a_burst_then_the_rate() -> None:
    now = [100.0]
    bucket = TokenBucket(10.0, 3, clock=lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.25  # 2.5 tokens
    assert [bucket.take() for _ in range(3)] == [True, True, False]
    now[0] += 60.0  # never more than the burst
    assert sum(bucket.take() for _ in range(10)) == 3
    assert all(TokenBucket(0, 1).take() for _ in range(1000))  # qps 0: no limit


def test_events_over_the_rate_are_dropped_and_counted(apiserver: ApiServer) -> None:
    http = KubeHttp.connect(server=apiserver.url)
    recorder = EventRecorder(http, "c", qps=0.001, burst=5)
    try:
        for i in range(40):
            recorder.record(Ref("default", f"p{i}"), "Normal", "Scheduled", "m")
        assert recorder.flush(30)
        assert sorted(e["involvedObject"]["name"] for e in events(http)) == sorted(f"p{i}" for i in range(5))
        assert (recorder.throttled, recorder.dropped) == (35, 0)
    finally:
        recorder.close()
        http.close()


def test_an_event_over_the_rate_is_not_even_built(apiserver: ApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    original = events_module.pod_event_body

    def counted(ref: Ref, *args: Any, **kwargs: Any) -> Any:
        built.append(ref.name)
        return original(ref, *args, **kwargs)

    monkeypatch.setattr(events_module, "pod_event_body", counted)
    http = KubeHttp.connect(server=apiserver.url)
    recorder = EventRecorder(http, "c", qps=0.001, burst=2)
    try:
        for i in range(10):
            recorder.record(Ref("default", f"p{i}"), "Normal", "Scheduled", "m")
        assert built == ["p0", "p1"]  # a binding flood spends nothing on the Events it drops
        assert recorder.throttled == 8
        assert recorder.flush(30)
    finally:
        recorder.close()
        http.close()


def test_record_event_about_a_whole_object_names_its_host_and_survives_a_refusal(apiserver: ApiServer) -> None:
    http = KubeHttp.connect(server=apiserver.url)
    try:
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j1", "namespace": "default", "uid": "u"}}
        record_event(http, job, "Warning", "DeadlineExceeded", "too slow", "job-controller", host="node-1")
        (event,) = events(http)
        assert event["involvedObject"] == {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "namespace": "default",
            "name": "j1",
            "uid": "u",
        }
        assert event["source"] == {"component": "job-controller", "host": "node-1"}
        assert (event["type"], event["reason"], event["message"]) == ("Warning", "DeadlineExceeded", "too slow")
        missing = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "no-such-namespace"}}
        record_event(http, missing, "Normal", "Started", "m", "kubelet")  # refused: logged, not raised
        assert events(http, "no-such-namespace") == []
    finally:
        http.close()


def test_event_names_sort_in_the_order_the_events_were_made() -> None:
    """`<object>.<hex nanoseconds>`, as client-go names Events: a list (sorted by name) keeps their order."""
    involved = {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "default"}
    names = [event_body(involved, "default", "kubelet", "Normal", f"R{i}", "m")["metadata"]["name"] for i in range(50)]
    assert sorted(names) == names
    assert len(set(names)) == 50
    assert all(n.startswith("p.") and int(n[2:], 16) > 0 for n in names)
