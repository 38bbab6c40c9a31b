"""The extender's verbs over the fake API server of tests/scheduler (`FakeApi`: pods and nodes in dicts,
binds applied and echoed back as watch events), and the nodes and pods the extender's tests use."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any, cast

from runtimekit.kube.objects import Node, Pod
from runtimekit.model import MigMode, NodeInventory
from runtimekit.model.authority import Signer
from runtimekit.scheduler.cache.live import LiveCache, live_cache
from runtimekit.scheduler.extender.schedconfig import EXTENDER_CONF_TEXT
from runtimekit.scheduler.extender.service import Verbs
from runtimekit.scheduler.extender.snapshot import NodeView
from runtimekit.scheduler.extender.wire import BindingArgs, ExtenderArgs
from runtimekit.scheduler.framework import Framework, parse_conf
from runtimekit.scheduler.inprocess import FrameworkConfig, build_framework
from scheduler.fake_api import FakeApi, P, pod_object


def gpu_node(
    name: str, gpus: int = 4, model: str = "H200", mig: MigMode = MigMode.OFF, cpu: str = "64"
) -> dict[str, Any]:
    inventory = NodeInventory.simulated(name, model, gpus, mig_mode=mig)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-{name}",
            "labels": {P.labels.gpu_model: model},
            "annotations": {P.annotations.node_devices: inventory.to_annotation()},
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def kit_pod(name: str, limits: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    return pod_object(name, limits, **options)


def extender_framework(conf: str = EXTENDER_CONF_TEXT) -> Framework:
    return build_framework(FrameworkConfig(parse_conf(conf)))


class Extender:
    """Verbs wired as the extender's server wires them, over a FakeApi."""

    def __init__(
        self,
        nodes: Iterable[dict[str, Any]] = (),
        framework: Framework | None = None,
        signer: Signer | None = None,
        api: FakeApi | None = None,
    ) -> None:
        self.api = api or FakeApi()
        self.live: LiveCache = live_cache(P, P.scheduler_name, self.api, bind_workers=1, signer=signer)
        self.api.attach(self.live.cache)
        self.view = NodeView(self.live.cache)
        self.framework = framework or extender_framework()
        self.verbs = Verbs(self.framework, self.live, self.view, P, threading.Lock(), bind_wait=0.05)
        for node in nodes:
            self.add_node(node)

    @property
    def names(self) -> list[str]:
        return list(self.api.nodes)

    def add_node(self, obj: dict[str, Any]) -> None:
        self.api.nodes[obj["metadata"]["name"]] = obj
        self.view.on_node("ADDED", cast(Node, obj))

    def remove_node(self, name: str) -> None:
        self.view.on_node("DELETED", cast(Node, self.api.nodes.pop(name)))

    def add_pod(self, obj: dict[str, Any]) -> Pod:
        self.api.add_pod(obj)
        return cast(Pod, obj)

    def args(self, pod: Pod, names: Iterable[str] | None = None) -> ExtenderArgs:
        return ExtenderArgs(pod, tuple(self.names if names is None else names))

    def bind_args(self, pod: Pod, node: str) -> BindingArgs:
        meta = pod.get("metadata") or {}
        return BindingArgs(str(meta.get("name")), str(meta.get("namespace")), str(meta.get("uid")), node)

    def schedule(self, pod: Pod) -> str | None:
        """What kube-scheduler does with the extender alone: filter, prioritize (two or more nodes
        left), the top score (ties: the first), bind. The node, or None when no node passes."""
        passed = self.verbs.filter(self.args(pod)).passed
        if not passed:
            return None
        node = passed[0]
        if len(passed) > 1:
            scores = self.verbs.prioritize(self.args(pod, passed))
            node = max(scores, key=lambda hs: hs[1])[0]
        error = self.verbs.bind(self.bind_args(pod, node))
        assert error is None, error
        return node

    def assignment(self, pod: Pod) -> str:
        meta = pod.get("metadata") or {}
        return str(
            self.api.pods[f"{meta.get('namespace')}/{meta.get('name')}"]["metadata"]["annotations"].get(
                P.annotations.assignment, ""
            )
        )
