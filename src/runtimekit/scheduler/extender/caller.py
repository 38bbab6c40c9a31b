"""A caller of the extender that does what kube-scheduler's `HTTPExtender` does (`pkg/scheduler/extender.go`
and `schedule_one.go`): bodies marshalled as Go marshals `k8s.io/kube-scheduler/extender/v1` (field
names, `null` for what is not sent), POSTed to `<urlPrefix>/<verb>` over a kept-alive connection, any
status but 200 an error, answers read without regard to key case; and `schedule`, one pod's way
through them: filter, prioritize when more than one node is left (score x weight x 10), the best
node (kube-scheduler breaks ties at random; here, by a seeded generator), bind. For the tests, the
benchmark and anyone who drives an extender by hand.
"""

from __future__ import annotations

import http.client
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import msgspec

from runtimekit.kube.objects import JsonObject, Node, Pod

_JSON = msgspec.json.Encoder()


class ExtenderCallError(Exception):
    """The extender answered with a status other than 200, or with an `Error`."""


def _folded(answer: Any) -> Any:
    """An answer's keys case-folded at every level of the extender's own types (Go reads them so)."""
    if isinstance(answer, dict):
        return {str(k).casefold(): v for k, v in answer.items()}
    return answer


@dataclass
class Filtered:
    nodes: list[str]
    failed: dict[str, str]
    unresolvable: dict[str, str]


class KubeSchedulerCaller:
    def __init__(
        self, url_prefix: str, node_cache_capable: bool = True, weight: int = 1, timeout: float = 30.0, seed: int = 0
    ) -> None:
        url = urlsplit(url_prefix)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self.path = url.path.rstrip("/")
        self.node_cache_capable, self.weight, self.timeout = node_cache_capable, weight, timeout
        self.rng = random.Random(seed)
        self._conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def post(self, verb: str, body: bytes) -> tuple[int, bytes]:
        """One POST as kube-scheduler sends it: the status and the body of the answer."""
        for attempt in (1, 2):  # a kept-alive connection the server closed: once more on a new one
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self._conn.request(
                    "POST", f"{self.path}/{verb}", body=body, headers={"Content-Type": "application/json"}
                )
                answer = self._conn.getresponse()
                return answer.status, answer.read()
            except (ConnectionError, http.client.HTTPException):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _call(self, verb: str, args: Mapping[str, Any]) -> Any:
        status, body = self.post(verb, _JSON.encode(args))
        if status != 200:
            raise ExtenderCallError(f"failed {verb} with extender, code {status}: {body.decode(errors='replace')}")
        return msgspec.json.decode(body)

    def _args(self, pod: Pod, nodes: Sequence[Node]) -> dict[str, Any]:
        if self.node_cache_capable:
            names = [str((n.get("metadata") or {}).get("name")) for n in nodes]
            return {"Pod": pod, "Nodes": None, "NodeNames": names}
        return {"Pod": pod, "Nodes": {"metadata": {}, "items": list(nodes)}, "NodeNames": None}

    # -- the verbs -------------------------------------------------------------------------
    def filter(self, pod: Pod, nodes: Sequence[Node]) -> Filtered:
        result = _folded(self._call("filter", self._args(pod, nodes)))
        if result.get("error"):
            raise ExtenderCallError(str(result["error"]))
        if self.node_cache_capable and result.get("nodenames") is not None:
            names = list(result["nodenames"])
        else:
            items = (_folded(result.get("nodes")) or {}).get("items") or []
            names = [str(item["metadata"]["name"]) for item in items]
        known = {str((n.get("metadata") or {}).get("name")) for n in nodes}
        stray = [n for n in names if n not in known]
        if stray:
            raise ExtenderCallError(f"extender claims a filtered node {stray[0]!r} which is not in the input node list")
        failed, unresolvable = result.get("failednodes") or {}, result.get("failedandunresolvablenodes") or {}
        return Filtered(names, dict(failed), dict(unresolvable))

    def prioritize(self, pod: Pod, nodes: Sequence[Node]) -> dict[str, int]:
        """Each node's score as kube-scheduler adds it: the extender's 0..10 x weight x 10."""
        listed = self._call("prioritize", self._args(pod, nodes)) or []
        out: dict[str, int] = {}
        for entry in listed:
            folded = _folded(entry)
            out[str(folded["host"])] = int(folded["score"]) * self.weight * 10
        return out

    def bind(self, pod: Pod, node: str) -> None:
        meta = pod.get("metadata") or {}
        args = {
            "PodName": meta.get("name", ""),
            "PodNamespace": meta.get("namespace", ""),
            "PodUID": meta.get("uid", ""),
            "Node": node,
        }
        error = _folded(self._call("bind", args)).get("error")
        if error:
            raise ExtenderCallError(str(error))

    def preempt(self, pod: Pod, victims: Mapping[str, tuple[Sequence[Pod], int]]) -> dict[str, list[str]]:
        """The nodes the extender keeps, with their victims' UIDs."""
        if self.node_cache_capable:
            meta = {
                node: {"Pods": [{"UID": (p.get("metadata") or {}).get("uid")} for p in pods], "NumPDBViolations": n}
                for node, (pods, n) in victims.items()
            }
            args: JsonObject = {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}
        else:
            whole = {node: {"Pods": list(pods), "NumPDBViolations": n} for node, (pods, n) in victims.items()}
            args = {"Pod": pod, "NodeNameToVictims": whole, "NodeNameToMetaVictims": None}
        result = _folded(self._call("preempt", args))
        kept = result.get("nodenametometavictims") or {}
        return {node: [str(_folded(p)["uid"]) for p in _folded(v).get("pods") or []] for node, v in kept.items()}

    # -- one pod's way through them --------------------------------------------------------
    def schedule(self, pod: Pod, nodes: Sequence[Node]) -> str | None:
        """Filter, prioritize (more than one node left), the best node, bind: the node, or None
        when no node passes."""
        passed = self.filter(pod, nodes).nodes
        if not passed:
            return None
        chosen = passed[0]
        if len(passed) > 1:
            by_name = {str((n.get("metadata") or {}).get("name")): n for n in nodes}
            scores = self.prioritize(pod, [by_name[name] for name in passed])
            top = max(scores.get(name, 0) for name in passed)
            chosen = self.rng.choice([name for name in passed if scores.get(name, 0) == top])
        self.bind(pod, chosen)
        return chosen
