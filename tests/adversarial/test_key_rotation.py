"""Issue 33 item 2: rotating the assignment key fails no pod, whatever order the mounts see it in.

kubelet refreshes a mounted Secret on each node on its own schedule, so the scheduler (which signs
assignments) and each node's device plugin (which verifies them at Allocate) see an edit of the key
Secret up to a minute or more apart. On the embedded cluster each of them reads its own copy of the
Secret (`ClusterOptions.key_folders`), written as kubelet writes a Secret volume. The Secret itself is
in the API server and is edited with the exact kubectl commands of docs/security.md#rotation; after
each edit one node's device plugin sees it first, then the scheduler, then the two other nodes' device
plugins, with pods bound and admitted on every node in between. A lag of 90 s gives exactly this
order of events; only the order matters, so nothing sleeps for it. No pod may fail, and the pods of
the window after the scheduler moved on must be signed with the new key (so the window was real).
The documented checks run too: `stale` (through a kubectl whose `exec` reads the part's mount, as the
embedded kubelet runs no exec) lists exactly the parts not refreshed yet, and nothing once all are.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from fixtures.apiserver import KUBECTL_BINARIES, KUBECTL_DISPATCHER
from fixtures.secretvolume import SecretVolume
from fixtures.waiting import wait_for
from runtimekit.base.keyring import Key
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.kube.http import KubeHttp
from runtimekit.protocol import KitProtocol

P = KitProtocol.default()
PODS = "/api/v1/namespaces/default/pods"
SECRET = "/api/v1/namespaces/kube-system/secrets/lj-runtimekit-assignment-key"
NODES = ("gpu-node-1", "gpu-node-2", "gpu-node-3")
# Who sees an edit when: gpu-node-1's device plugin first, then the scheduler, then the others.
ORDER: tuple[tuple[str, ...], ...] = (("gpu-node-1",), ("scheduler",), ("gpu-node-2", "gpu-node-3"))
PODS_PER_WINDOW = 42  # 14 per node, bound and admitted while the mounts disagree
RELOAD_S = 1.5  # the components look at their key folder every second (a look during a write: a second later)

# docs/security.md#rotation, verbatim (test_the_procedure_is_the_documented_one checks it)
STAGE = (
    "NEXT=$(head -c 36 /dev/urandom | base64 | tr -d '\\n' | base64 | tr -d '\\n')\n"
    'kubectl -n $NS patch secret $SECRET --type=json -p "[{\\"op\\":\\"add\\",\\"path\\":\\"/data/next\\",'
    '\\"value\\":\\"$NEXT\\"}]"'
)
PROMOTE = (
    'kubectl -n $NS patch secret $SECRET --type=json -p \'[{"op":"move","from":"/data/current",'
    '"path":"/data/previous"},{"op":"move","from":"/data/next","path":"/data/current"}]\''
)
RETIRE = 'kubectl -n $NS patch secret $SECRET --type=json -p \'[{"op":"remove","path":"/data/previous"}]\''
WAITING = (
    "kubectl get pods -A --field-selector=status.phase=Pending -o jsonpath='{range .items[*]}"
    "{.metadata.namespace}/{.metadata.name} {.metadata.annotations.runtimekit\\.aliyun\\.com/gpu-assignment-signature}"
    '{"\\n"}{end}\' | grep " v1\\.$OLD\\."'
)
STALE = """\
stale() {
  want=$(kubectl -n $NS get secret $SECRET -o jsonpath="{.data.$2}" | base64 -d | sha256sum | cut -c1-64)
  for pod in $(kubectl -n $NS get pods -l app.kubernetes.io/component=$1 -o name); do
    got=$(kubectl -n $NS exec $pod -- sha256sum /var/run/secrets/lj-runtimekit/assignment-key/$2 | cut -c1-64)
    [ "$got" = "$want" ] || echo "$pod"
  done
}"""
OLD_ID = "OLD=$(kubectl -n $NS get secret $SECRET -o jsonpath='{.data.previous}' | base64 -d | sha256sum | cut -c1-16)"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"
# kubectl, but `exec POD -- COMMAND` runs COMMAND here on the folder that stands in for the mount of
# the part the pod is named after (`<component>--<part>`).
SHIM = """#!/usr/bin/env bash
for ((i = 1; i <= $#; i++)); do
  if [[ "${!i}" == exec ]]; then
    j=$((i + 1)); pod="${!j}"; part="${pod##*--}"
    shift $((i + 2))
    mount=/var/run/secrets/lj-runtimekit/assignment-key
    exec "${@//"$mount"/$MOUNTS/$part}"
  fi
done
exec KUBECTL "$@"
"""
COMPONENT = {"scheduler": "scheduler", **dict.fromkeys(NODES, "device-plugin")}


@dataclass
class Rig:
    cluster: EmbeddedCluster
    http: KubeHttp
    mounts: dict[str, SecretVolume]  # part ("scheduler" or a node) -> its copy of the Secret
    shell_env: dict[str, str]

    def run(self, script: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", "-c", script], capture_output=True, text=True, env=self.shell_env, timeout=60, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{script}\nfailed ({done.returncode}): {done.stdout}{done.stderr}")
        return done

    def secret(self) -> dict[str, bytes]:
        data = cast(dict[str, str], self.http.get(SECRET).get("data") or {})
        return {name: base64.b64decode(value) for name, value in data.items()}

    def refresh(self, parts: tuple[str, ...]) -> None:
        """kubelet refreshes these parts' mounts of the Secret; they read them within a second."""
        data = self.secret()
        for part in parts:
            self.mounts[part].write(data)
        time.sleep(RELOAD_S)

    def signing_key(self) -> str:
        return Key.of(self.mounts["scheduler"].data["current"].strip()).id

    def stale(self, component: str, key: str) -> set[str]:
        """The parts the documented check says are not up to date with the Secret's `key`."""
        listed = self.run(f"{STALE}\nstale {component} {key}").stdout.split()
        return {name.rpartition("--")[2] for name in listed}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    kubectl = KUBECTL_DISPATCHER or next((str(b) for b in KUBECTL_BINARIES.values()), None)
    if kubectl is None or shutil.which("bash") is None:
        pytest.skip("needs kubectl and bash")
    root = tmp_path_factory.mktemp("rotation")
    first = {"current": base64.b64encode(os.urandom(36))}  # as the documented `kubectl create secret` makes it
    mounts = {part: SecretVolume(root / "mounts" / part) for part in ("scheduler", *NODES)}
    for mount in mounts.values():
        mount.write(first)
    options = ClusterOptions(
        nodes=len(NODES), gpus_per_node=2, controller=False, key_folders=lambda part: mounts[part].folder
    )
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").write_text(SHIM.replace("KUBECTL", kubectl))
    (bin_dir / "kubectl").chmod(0o755)
    with start_cluster(options, ready_timeout_s=90) as cluster:
        env = {
            "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(root),
            "KUBECONFIG": str(cluster.kubeconfig),
            "NS": "kube-system",
            "SECRET": "lj-runtimekit-assignment-key",
            "MOUNTS": str(root / "mounts"),
        }
        http = cluster.http("operator")
        rig = Rig(cluster, http, mounts, env)
        rig.run(f"kubectl -n $NS create secret generic $SECRET --from-literal=current={first['current'].decode()}")
        for part, component in COMPONENT.items():  # stand-ins for the parts' pods, for `stale` to find
            labels = {"app.kubernetes.io/name": "lj-runtimekit", "app.kubernetes.io/component": component}
            spec = {"schedulerName": "nobody", "containers": [{"name": "main", "image": "runtimekit"}]}
            meta = {"name": f"{component}--{part}", "namespace": "kube-system", "labels": labels}
            http.post(
                "/api/v1/namespaces/kube-system/pods",
                {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec},
            )
        yield rig
        http.close()


def pod(name: str, node: str) -> dict[str, Any]:
    limits = {P.resources.core: "2"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": P.scheduler_name,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{"name": "main", "image": "cuda:12", "resources": {"limits": limits}}],
        },
    }


def load(rig: Rig, window: str) -> list[dict[str, Any]]:
    """PODS_PER_WINDOW pods over every node, each left Running or Failed; returns them, then deletes them."""
    names = [f"{window}-{i}" for i in range(PODS_PER_WINDOW)]
    for i, name in enumerate(names):
        rig.http.post(PODS, pod(name, NODES[i % len(NODES)]))

    def settled() -> list[dict[str, Any]] | None:
        items = [p for p in rig.http.get(PODS)["items"] if p["metadata"]["name"] in names]
        done = [p for p in items if (p.get("status") or {}).get("phase") in ("Running", "Failed")]
        return done if len(done) == len(names) else None

    pods: list[dict[str, Any]] = wait_for(settled, timeout=60, what=f"the pods of {window} running or failed")
    for name in names:
        rig.http.delete(f"{PODS}/{name}")
    return pods


def failures(pods: list[dict[str, Any]]) -> list[str]:
    return [
        f"{p['metadata']['name']} on {p['spec'].get('nodeName')}: {p['status'].get('message', '')[-160:]}"
        for p in pods
        if p["status"].get("phase") != "Running"
    ]


def signed_with(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["annotations"][P.annotations.assignment_signature].split(".")[1] for p in pods}


def rotate(rig: Rig, step: str, script: str, check: tuple[str, str] | None = None) -> None:
    """Edit the Secret; the edit reaches the parts in ORDER, with a window of pods after each refresh but
    the last. `check` (component, key file) is the documented check to pass before the next edit: it
    lists the parts of that component not refreshed yet, and nothing in the end."""
    rig.run(script)
    refreshed: set[str] = set()
    for index, parts in enumerate(ORDER):
        rig.refresh(parts)
        refreshed.update(parts)
        if check is not None:
            lagging = {part for part, component in COMPONENT.items() if component == check[0]} - refreshed
            assert rig.stale(*check) == lagging, f"{step}: the check after {parts}"
        if index == len(ORDER) - 1:
            continue
        window = f"{step}-after-{'-'.join(parts)}".replace("gpu-node-", "n")
        pods = load(rig, window)
        assert not failures(pods), f"{window}: {len(failures(pods))} pods failed:\n" + "\n".join(failures(pods))
        assert {p["spec"]["nodeName"] for p in pods} == set(NODES)
        assert signed_with(pods) == {rig.signing_key()}, window


@pytest.mark.slow  # an embedded cluster of three nodes, and windows of pods bound and admitted
def test_a_rotation_with_the_mounts_minutes_apart_fails_no_pod(rig: Rig) -> None:
    before = rig.signing_key()
    rotate(rig, "stage", STAGE, check=("device-plugin", "next"))
    rotate(rig, "promote", PROMOTE, check=("scheduler", "current"))
    after = rig.signing_key()
    assert after != before
    assert set(rig.secret()) == {"current", "previous"}
    assert rig.run(f"{OLD_ID}\n{WAITING}", check=False).stdout == ""  # nothing bound with the old key waits
    rotate(rig, "retire", RETIRE)
    assert set(rig.secret()) == {"current"}
    assert rig.signing_key() == after


@pytest.mark.slow  # the rig is a whole embedded cluster (about ten seconds to start)
def test_promoting_without_a_staged_key_changes_nothing(rig: Rig) -> None:
    before = rig.secret()
    done = rig.run(PROMOTE, check=False)
    assert done.returncode != 0
    assert rig.secret() == before


@pytest.mark.slow  # the rig is a whole embedded cluster (about ten seconds to start)
def test_the_waiting_check_lists_a_pod_bound_with_the_old_key_and_not_admitted(rig: Rig) -> None:
    """A pod bound to a node whose kubelet is away keeps waiting for admission: retiring its key now would
    fail it when the kubelet comes back; the documented check lists it."""
    key = rig.signing_key()
    notes = {P.annotations.assignment_signature: f"v1.{key}.{'0' * 64}"}
    spec = {"nodeName": "a-node-away", "containers": [{"name": "main", "image": "cuda:12"}]}
    rig.http.post(
        PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "away", "annotations": notes}, "spec": spec}
    )
    try:
        listed = rig.run(f"OLD={key}\n{WAITING}", check=False).stdout
        assert listed.split() == ["default/away", notes[P.annotations.assignment_signature]]
    finally:
        rig.http.delete(f"{PODS}/away", {"gracePeriodSeconds": 0})
        wait_for(
            lambda: not [p for p in rig.http.get(PODS)["items"] if p["metadata"]["name"] == "away"], what="away gone"
        )


@pytest.mark.parametrize(
    "command",
    [STAGE, PROMOTE, RETIRE, STALE, OLD_ID, WAITING],
    ids=["stage", "promote", "retire", "stale", "old id", "waiting"],
)
def test_the_procedure_is_the_documented_one(command: str) -> None:
    for line in command.splitlines():
        assert line in DOCS.read_text(encoding="utf-8"), f"docs/security.md lacks: {line}"
