"""The webhook configurations `runtimekit up` registers are the ones deploy/webhook/ installs (the client
config aside: a URL there, the Service here), with the failure policies and timeouts the guide gives."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from runtimekit.webhook.registration import BINDINGS, MUTATE, VALIDATE, Client, configurations

DEPLOYED = Path(__file__).resolve().parents[2] / "deploy" / "webhook" / "04-configurations.yaml"


def without_ca(obj: Any) -> dict[str, Any]:
    found: dict[str, Any] = copy.deepcopy(dict(obj))
    found["metadata"].pop("annotations", None)
    for hook in found["webhooks"]:
        hook["clientConfig"].pop("caBundle", None)
    return found


def test_the_deployed_configurations_are_the_registered_ones() -> None:
    client = Client("", service_namespace="kube-system", service_name="lj-runtimekit-webhook")
    made = [without_ca(obj) for obj in configurations(client)]
    deployed = [without_ca(obj) for obj in yaml.safe_load_all(DEPLOYED.read_text())]
    assert made == deployed


def test_policies_and_timeouts() -> None:
    mutating, validating = configurations(Client("Q0E=", url="https://127.0.0.1:9443"))
    hooks = {hook["name"]: hook for hook in [*mutating["webhooks"], *validating["webhooks"]]}
    policies = {name: (hook["failurePolicy"], hook["timeoutSeconds"]) for name, hook in hooks.items()}
    assert policies == {MUTATE: ("Ignore", 5), VALIDATE: ("Fail", 5), BINDINGS: ("Ignore", 5)}
    assert hooks[MUTATE]["reinvocationPolicy"] == "IfNeeded"
    assert hooks[VALIDATE]["clientConfig"] == {"url": "https://127.0.0.1:9443/validate", "caBundle": "Q0E="}
    assert all(hook["sideEffects"] == "None" for hook in hooks.values())


def test_hamis_opt_out_keeps_the_mutating_webhook_away_only() -> None:
    mutating, validating = configurations(Client("", url="https://h"), hami=True)
    opt_out = {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}
    (mutate,) = mutating["webhooks"]
    assert opt_out in mutate["namespaceSelector"]["matchExpressions"]
    assert mutate["objectSelector"] == {"matchExpressions": [opt_out]}
    for hook in validating["webhooks"]:  # the assignment check applies to every pod
        assert opt_out not in hook["namespaceSelector"]["matchExpressions"]
        assert hook["objectSelector"] == {}
