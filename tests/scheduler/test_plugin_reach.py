"""The assignment key is out of reach of what plugins are handed: a custom plugin, named by the conf
and loaded from a plugins directory into a live scheduler that signs, records everything the
framework gives it (its arguments and build context, the session view at open and at Reserve, the
cycle state and snapshot, the task, the binding at PreBind and Bind); a walk over the attributes of
all of it (and over the module globals of the kit) finds neither the key ring, nor a key, nor the
key's bytes, nor anything that signs. The pod is still bound with a signature that verifies.

Python cannot stop in-process code from reading the key file or walking `gc`; this is the part a
plugin is handed (docs/security.md#custom-plugins)."""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.base.keyring import Key, KeyRing, ensure_key_folder
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.model.authority import signature_problem
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, SchedulerConfig, build_scheduler
from runtimekit.scheduler.framework import parse_conf
from scheduler.helpers import gpu_node

P = KitProtocol.default()
SPY = """\
from runtimekit.scheduler.framework.interfaces import Bind, Plugin, PreBind, Reserve
from runtimekit.scheduler.framework.status import SKIP, SUCCESS


class Spy(Plugin, Reserve, PreBind, Bind):
    name = "spy"

    def __init__(self, handed):
        self.handed = handed

    def on_session_open(self, ssn):
        self.handed.append(("on_session_open", ssn))

    def reserve(self, task, choice, ssn):
        self.handed.extend([("reserve", task), ("reserve", choice), ("reserve", ssn), ("reserve", ssn.state)])
        return SUCCESS

    def unreserve(self, task):
        pass

    def pre_bind(self, binding):
        self.handed.append(("pre_bind", binding))
        return SUCCESS

    def bind(self, binding):
        self.handed.append(("bind", binding))
        return SKIP


def New(arguments, context):
    return Spy([("New", arguments), ("New", context)])
"""
CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: gpushare
  - name: spy
    arguments: {spy.anything: 1}
"""


def path_to(root: object, found: Callable[[object], bool], start: str) -> str | None:
    """The first attribute path from `root` to an object `found` accepts, or None. Follows instance
    attributes (dict and slots), container items, bound methods' `__self__`, closures, defaults and
    partials; not modules, classes or functions' globals (those lead to everything in the process)."""
    seen: set[int] = set()
    stack: list[tuple[object, str]] = [(root, start)]
    while stack:
        obj, path = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if found(obj):
            return path
        if isinstance(obj, (types.ModuleType, type, str, bytes, int, float, bool)) or obj is None:
            continue
        stack.extend(children(obj, path))
    return None


def children(obj: object, path: str) -> Iterator[tuple[object, str]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield key, f"{path}<key>"
            yield value, f"{path}[{key!r}]"
    elif isinstance(obj, (list, tuple, set, frozenset)):
        yield from ((item, f"{path}[{i}]") for i, item in enumerate(obj))
    if isinstance(obj, types.MethodType):
        yield obj.__self__, f"{path}.__self__"
    if isinstance(obj, types.FunctionType):
        cells = obj.__closure__ or ()
        yield from ((cell.cell_contents, f"{path}.<closure>") for cell in cells if cell.cell_contents is not None)
        yield (obj.__defaults__, obj.__kwdefaults__), f"{path}.<defaults>"
        return
    if isinstance(obj, functools.partial):
        yield (obj.func, obj.args, obj.keywords), f"{path}.<partial>"
    attributes = vars(obj) if hasattr(obj, "__dict__") and isinstance(vars(obj), dict) else {}
    yield from ((value, f"{path}.{name}") for name, value in attributes.items())
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if hasattr(obj, name):
                yield getattr(obj, name), f"{path}.{name}"


def signing(secret: bytes) -> Callable[[object], bool]:
    """The key ring, a key, the key's bytes or text, or anything with a `sign` method."""
    text = secret.decode()

    def found(obj: object) -> bool:
        if isinstance(obj, (KeyRing, Key)):
            return True
        if isinstance(obj, (bytes, str)):
            return (secret in obj) if isinstance(obj, bytes) else (text in obj)
        return any("sign" in vars(cls) for cls in type(obj).__mro__ if cls is not object)

    return found


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    yield client
    client.close()


def test_nothing_a_plugin_is_handed_leads_to_the_assignment_key(http: KubeHttp, tmp_path: Path) -> None:
    keys = ensure_key_folder(tmp_path / "keys")
    secret = (keys / "current").read_bytes().strip()
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "spy.py").write_text(SPY)
    config = SchedulerConfig(
        kube=http,
        conf=parse_conf(CONF),
        protocol=P,
        plugins_dir=str(plugins),
        keys=AssignmentKeys(keys),
        period=0.02,
    )
    scheduler = build_scheduler(config).start()
    try:
        http.post("/api/v1/nodes", gpu_node("n1", 2))
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p1", "namespace": "default"},
            "spec": {
                "schedulerName": P.scheduler_name,
                "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {P.resources.core: 30}}}],
            },
        }
        http.post("/api/v1/namespaces/default/pods", pod)
        bound = wait_for(
            lambda: (p := http.get("/api/v1/namespaces/default/pods/p1"))["spec"].get("nodeName") and p,
            what="the pod bound",
        )
        scheduler.binder.drain()
    finally:
        scheduler.stop()
    annotations = bound["metadata"]["annotations"]
    signature = annotations.get(P.annotations.assignment_signature)
    problem = signature_problem(
        KeyRing.from_folder(keys), bound["metadata"]["uid"], annotations[P.annotations.assignment], signature
    )
    assert problem == ""  # the binder still signs
    spy = scheduler.framework.plugin("spy")
    assert spy is not None
    handed: list[tuple[str, object]] = vars(spy)["handed"]
    assert {point for point, _ in handed} == {"New", "on_session_open", "reserve", "pre_bind", "bind"}
    found = signing(secret)
    for point, obj in handed:
        path = path_to(obj, found, f"<{type(obj).__name__} handed at {point}>")
        assert path is None, f"the key is reachable from what a plugin is handed: {path}"
    for name, module in list(sys.modules.items()):
        if name.startswith("runtimekit"):
            values: dict[str, Any] = {k: v for k, v in vars(module).items() if not isinstance(v, types.ModuleType)}
            path = path_to(values, found, f"<{name}>")
            assert path is None, f"the key is reachable from a module global: {path}"
