"""A new user's first day with the real kubectl against `runtimekit up`: about a hundred commands
(taken from the kubectl cheat sheet and kubectl's test/cmd/*.sh cases), each checked against what
kube-apiserver answers (the exit code and a key part of the output). Prints one line per command and
the count that behave as on a real cluster.

    python scripts/day_one_kubectl.py                 # starts `runtimekit up` itself
    python scripts/day_one_kubectl.py --kubeconfig K  # against a cluster that is already up

Each step names the area it exercises: `base` (objects, controllers, tables, bad input), `openapi`
(OpenAPI and explain), `apply` (server-side apply), `authz` (the authorization API, bootstrap
objects), `containers` (the simulated containers' lifecycle, events, logs, exec). One step differs
by design: `kubectl exec` is refused, plainly, because simulated containers run no processes.
Exit status: 0 when every `base` step behaves, else 1.
Also run by tests/e2e/test_day_one_kubectl_e2e.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

NS = "day1"
EDITOR = "#!/bin/sh\nsed -i 's/^  replicas: [0-9]*$/  replicas: 2/' \"$1\"\n"
API = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: api-config, namespace: day1}
data: {mode: fast}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: day1, labels: {app: api}}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: api
        image: nginx:1.27
        ports: [{name: http, containerPort: 8080}]
"""
STATEFULSET = """\
apiVersion: v1
kind: Service
metadata: {name: db, namespace: day1}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 5432}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: day1}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: postgres:16, ports: [{containerPort: 5432}]}]
"""
NO_KIND = "apiVersion: v1\nmetadata: {name: x}\n"
NO_CONTAINERS = "apiVersion: v1\nkind: Pod\nmetadata: {name: empty, namespace: day1}\nspec: {containers: []}\n"


@dataclass(frozen=True)
class Step:
    area: str
    args: tuple[str, ...]
    rc: int = 0
    expect: tuple[str, ...] = ()  # each must appear in stdout + stderr
    absent: tuple[str, ...] = ()  # none may appear
    stdin: str | None = None
    editor: bool = False


def step(
    area: str,
    line: str,
    rc: int = 0,
    *expect: str,
    absent: tuple[str, ...] = (),
    stdin: str | None = None,
    editor: bool = False,
) -> Step:
    """`line` is split on spaces, except inside single quotes."""
    args: list[str] = []
    for i, part in enumerate(line.split("'")):
        args += [part] if i % 2 else part.split()
    return Step(area, tuple(args), rc, tuple(expect), absent, stdin, editor)


N = f"-n {NS}"
STEPS: list[Step] = [
    # the cluster
    step("base", "version --output=json", 0, "serverVersion"),
    step("base", "cluster-info", 0, "is running at"),
    step("base", "get nodes", 0, "gpu-node-1", " Ready "),
    step("base", "get nodes -o wide", 0, "INTERNAL-IP", "CONTAINER-RUNTIME"),
    step("base", "describe node gpu-node-1", 0, "Capacity:", "Allocatable:"),
    step("base", "api-resources", 0, "deployments", "cronjobs", "endpointslices"),
    step("base", "api-versions", 0, "apps/v1", "discovery.k8s.io/v1"),
    step("base", "get namespaces", 0, "default", "kube-system"),
    step("authz", "get service kubernetes", 0, "kubernetes"),
    step("authz", "get configmap kube-root-ca.crt", 0, "kube-root-ca.crt"),
    step("base", f"create namespace {NS}", 0, f"namespace/{NS} created"),
    step("authz", f"get serviceaccount default {N}", 0, "default"),
    step("base", f"describe namespace {NS}", 0, "Active"),
    # deployments
    step("base", f"create deployment web --image=nginx:1.27 {N}", 0, "deployment.apps/web created"),
    step("base", f"rollout status deployment/web {N} --timeout=90s", 0, "successfully rolled out"),
    step("base", f"get deployment web {N}", 0, "1/1"),
    step("base", f"get pods {N} -l app=web", 0, "Running"),
    step("base", f"scale deployment web --replicas=3 {N}", 0, "deployment.apps/web scaled"),
    step("base", f"wait --for=condition=Available deployment/web {N} --timeout=90s", 0, "condition met"),
    step("base", f"rollout status deployment/web {N} --timeout=90s", 0, "successfully rolled out"),
    step("base", f"get replicasets {N}", 0, "web-"),
    step("base", f"set image deployment/web nginx=nginx:1.28 {N}", 0, "image updated"),
    step("base", f"rollout status deployment/web {N} --timeout=90s", 0, "successfully rolled out"),
    step("base", f"rollout history deployment/web {N}", 0, "REVISION"),
    step("base", f"rollout undo deployment/web {N}", 0, "rolled back"),
    step("base", f"rollout status deployment/web {N} --timeout=90s", 0, "successfully rolled out"),
    step("base", f"rollout restart deployment/web {N}", 0, "restarted"),
    step("base", f"rollout pause deployment/web {N}", 0, "paused"),
    step("base", f"rollout resume deployment/web {N}", 0, "resumed"),
    step("base", f"label deployment web tier=frontend {N}", 0, "labeled"),
    step("base", f"annotate deployment web owner=day1 {N}", 0, "annotated"),
    step("base", f"get deployments -l tier=frontend -o name {N}", 0, "deployment.apps/web"),
    step("base", f"get deployment web -o jsonpath={{.spec.replicas}} {N}", 0, "3"),
    step("base", f'patch deployment web -p \'{{"spec":{{"replicas":1}}}}\' {N}', 0, "patched"),
    step("base", f'patch deployment web --type=merge -p \'{{"metadata":{{"labels":{{"x":"y"}}}}}}\' {N}', 0, "patched"),
    step(
        "base",
        f'patch deployment web --type=json -p \'[{{"op":"replace","path":"/spec/replicas","value":1}}]\' {N}',
        0,
        "patched",
    ),
    step("base", f"edit deployment web {N}", 0, "edited", editor=True),
    step("base", f"get deployment web -o jsonpath={{.spec.replicas}} {N}", 0, "2"),
    step("base", f"describe deployment web {N}", 0, "Replicas:", "StrategyType:"),
    step("base", f"expose deployment web --port=80 {N}", 0, "service/web exposed"),
    step("base", f"get service web -o wide {N}", 0, "SELECTOR", "app=web"),
    step(
        "base",
        f"wait --for=jsonpath={{.subsets[0].addresses[1].ip}} endpoints/web {N} --timeout=60s",
        0,
        "condition met",
    ),
    step("base", f"get endpoints web {N}", 0, ":80"),
    step("base", f"get endpointslices -l kubernetes.io/service-name=web {N}", 0, "IPv4", "80"),
    step("base", f"describe service web {N}", 0, "Endpoints:", ":80"),
    step("base", f"get all {N}", 0, "deployment.apps/web", "service/web"),
    # apply and diff
    step(
        "base",
        "apply -f -",
        0,
        "configmap/api-config created",
        "deployment.apps/api created",
        stdin=API.replace("REPLICAS", "1"),
    ),
    step(
        "base",
        "apply -f -",
        0,
        "configmap/api-config unchanged",
        "deployment.apps/api unchanged",
        stdin=API.replace("REPLICAS", "1"),
    ),
    step("base", "diff -f -", 1, "replicas", stdin=API.replace("REPLICAS", "2")),
    step("base", "diff -f -", 0, stdin=API.replace("REPLICAS", "1")),
    step("base", "apply --dry-run=server -f -", 0, "(server dry run)", stdin=API.replace("REPLICAS", "2")),
    step("base", "apply -f -", 0, "deployment.apps/api configured", stdin=API.replace("REPLICAS", "2")),
    step("apply", "apply --server-side -f -", 0, "serverside-applied", stdin=API.replace("REPLICAS", "2")),
    step("base", "create -f -", 1, "AlreadyExists", stdin=API.replace("REPLICAS", "2")),
    step("base", f"rollout status deployment/api {N} --timeout=90s", 0, "successfully rolled out"),
    step("base", "delete -f -", 0, "deleted", stdin=API.replace("REPLICAS", "2")),
    # configuration
    step("base", f"create configmap app-config --from-literal=a=1 {N}", 0, "configmap/app-config created"),
    step("base", f"get configmap app-config -o jsonpath={{.data.a}} {N}", 0, "1"),
    step("base", f"create secret generic creds --from-literal=password=s3cret {N}", 0, "secret/creds created"),
    step("base", f"get secret creds -o jsonpath={{.data.password}} {N}", 0, "czNjcmV0"),
    step("base", f"get secrets --field-selector type=Opaque {N}", 0, "creds"),
    step("base", f"patch configmap app-config -p '{{\"immutable\":true}}' {N}", 0, "patched"),
    step(
        "base",
        f'patch configmap app-config -p \'{{"data":{{"a":"2"}}}}\' {N}',
        1,
        "field is immutable when `immutable` is set",
    ),
    # pods
    step("base", f"run pod1 --image=nginx:1.27 {N}", 0, "pod/pod1 created"),
    step("base", f"wait --for=condition=Ready pod/pod1 {N} --timeout=60s", 0, "condition met"),
    step("base", f"get pod pod1 -o wide {N}", 0, "NOMINATED NODE", "READINESS GATES"),
    step("base", f"describe pod pod1 {N}", 0, "Events:", "Scheduled"),
    step("containers", f"get events --field-selector involvedObject.name=pod1,reason=Started {N}", 0, "Started"),
    step("base", f"get events {N}", 0, "LAST SEEN", "TYPE", absent=("NAME ",)),
    step("containers", f"logs pod1 {N}", 0),
    step("containers", f"exec pod1 {N} -- ls /", 0),
    step("base", f"get pods --field-selector status.phase=Running {N}", 0, "pod1"),
    step("base", "get pods -A --field-selector spec.nodeName=gpu-node-1,status.phase!=Failed", 0),
    step("base", f"delete pod pod1 {N}", 0, 'pod "pod1" deleted'),
    # nodes
    step("base", "cordon gpu-node-2", 0, "cordoned"),
    step("base", "get nodes --field-selector spec.unschedulable=false", 0, "gpu-node-1", absent=("gpu-node-2",)),
    step("base", "get nodes --field-selector spec.unschedulable=true", 0, "gpu-node-2", absent=("gpu-node-1",)),
    step("base", "uncordon gpu-node-2", 0, "uncordoned"),
    step("base", "taint nodes gpu-node-2 dedicated=gpu:NoSchedule", 0, "tainted"),
    step("base", "taint nodes gpu-node-2 dedicated=gpu:NoSchedule-", 0, "untainted"),
    step("base", "drain gpu-node-2 --ignore-daemonsets --delete-emptydir-data --timeout=90s", 0, "drained"),
    step("base", "uncordon gpu-node-2", 0, "uncordoned"),
    step("base", "label node gpu-node-1 disk=ssd", 0, "labeled"),
    step("base", "top nodes", 1, "Metrics API not available"),
    # statefulsets
    step("base", "apply -f -", 0, "service/db created", "statefulset.apps/db created", stdin=STATEFULSET),
    step("base", f"rollout status statefulset/db {N} --timeout=120s", 0, "roll"),
    step("base", f"get pods -l app=db {N}", 0, "db-0", "db-1"),
    step("base", f"get endpoints db {N}", 0, ":5432"),
    step("base", f"scale statefulset db --replicas=1 {N}", 0, "scaled"),
    # jobs and cronjobs
    step("base", f"create job once --image=busybox:1.36 {N} -- echo hi", 0, "job.batch/once created"),
    step("containers", f"wait --for=condition=complete job/once {N} --timeout=60s", 0, "condition met"),
    step("containers", f"logs job/once {N}", 0, "hi"),
    step(
        "base",
        f"create cronjob tick --image=busybox:1.36 --schedule=*/5_*_*_*_* {N} -- date",
        0,
        "cronjob.batch/tick created",
    ),
    step("base", f"get cronjob tick {N}", 0, "SCHEDULE", "TIMEZONE", "*/5 * * * *", "False"),
    step("base", f"get cronjob tick -o jsonpath={{.spec.concurrencyPolicy}} {N}", 0, "Allow"),
    step("base", f"create job tick-now --from=cronjob/tick {N}", 0, "job.batch/tick-now created"),
    step("base", f'patch cronjob tick -p \'{{"spec":{{"suspend":true}}}}\' {N}', 0, "patched"),
    step("base", f"get jobs {N}", 0, "tick-now", "STATUS", "COMPLETIONS"),
    # explain and auth
    step("openapi", "explain pod.spec.containers", 0, "FIELD"),
    step("openapi", "explain deployment.spec.replicas", 0, "replicas"),
    step("authz", "auth can-i create deployments", 0, "yes"),
    step("authz", f"auth can-i --list {N}", 0, "Resources"),
    step("authz", "auth whoami", 0, "Username"),
    # bad input
    step("base", f"get pod nope {N}", 1, 'pods "nope" not found'),
    step("base", "get nosuchkind", 1, 'the server doesn\'t have a resource type "nosuchkind"'),
    step("base", "create deployment Bad_Name --image=x", 1, "Invalid value"),
    step("base", "apply -f -", 1, "kind not set", stdin=NO_KIND),
    step("base", "create -f -", 1, "spec.containers: Required value", stdin=NO_CONTAINERS),
    step("base", f"scale deployment nope --replicas=1 {N}", 1, "no objects passed to scale"),  # kubectl drops the 404
    step("base", "get pods --field-selector foo=bar", 1, "field label not supported: foo"),
    step("base", f"delete namespace {NS} --timeout=120s", 0, f'namespace "{NS}" deleted'),
]


@dataclass
class Outcome:
    step: Step
    ok: bool
    why: str = ""
    seconds: float = 0.0


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def by_area(self) -> dict[str, tuple[int, int]]:
        areas: dict[str, tuple[int, int]] = {}
        for o in self.outcomes:
            good, total = areas.get(o.step.area, (0, 0))
            areas[o.step.area] = (good + o.ok, total + 1)
        return areas


def run_step(s: Step, kubeconfig: Path, home: Path) -> Outcome:
    env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(kubeconfig)}
    if s.editor:
        editor = home / "editor.sh"
        editor.write_text(EDITOR)
        editor.chmod(0o755)
        env["KUBE_EDITOR"] = str(editor)
    args = [a.replace("_", " ") if a.startswith("--schedule=") else a for a in s.args]
    began = time.monotonic()
    try:
        done = subprocess.run(
            ["kubectl", *args], input=s.stdin, capture_output=True, text=True, env=env, timeout=180, check=False
        )
    except subprocess.TimeoutExpired:
        return Outcome(s, False, "timed out", time.monotonic() - began)
    took = time.monotonic() - began
    text = done.stdout + done.stderr
    problems = []
    if done.returncode != s.rc:
        problems.append(f"exit {done.returncode}, expected {s.rc}")
    problems += [f"no {e!r}" for e in s.expect if e not in text]
    problems += [f"unexpected {a!r}" for a in s.absent if a in text]
    why = "; ".join(problems) + (f": {text.strip()[-300:]}" if problems else "")
    return Outcome(s, not problems, why, took)


@contextmanager
def runtimekit_up(folder: Path) -> Iterator[Path]:
    log = (folder / "up.log").open("w")
    up = subprocess.Popen(
        [sys.executable, "-m", "runtimekit.cli.main", "up", "--nodes", "2", "--gpus-per-node", "2"],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert up.stdout is not None
        line = up.stdout.readline().strip()
        if not line.startswith("ready: "):
            raise RuntimeError(f"runtimekit up did not start: {line!r} (see {folder / 'up.log'})")
        yield Path(line.removeprefix("ready: "))
    finally:
        up.terminate()
        up.wait(30)
        log.close()


def run_all(kubeconfig: Path, home: Path, verbose: bool = True) -> Report:
    report = Report()
    for s in STEPS:
        outcome = run_step(s, kubeconfig, home)
        report.outcomes.append(outcome)
        if verbose:
            mark = "ok " if outcome.ok else "DIFFERS"
            print(f"{mark:7} [{s.area:9}] kubectl {' '.join(s.args)}  {outcome.why}", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", help="an embedded cluster that is up (default: start one)")
    parser.add_argument("--json", help="also write the outcomes to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="day1-") as scratch:
        folder = Path(scratch)
        (folder / "home").mkdir()
        if args.kubeconfig:
            report = run_all(Path(args.kubeconfig), folder / "home")
        else:
            with runtimekit_up(folder) as kubeconfig:
                report = run_all(kubeconfig, folder / "home")
    good = sum(o.ok for o in report.outcomes)
    print(f"{good} of {len(report.outcomes)} commands behave as on kube-apiserver")
    for area, (ok, total) in sorted(report.by_area().items()):
        print(f"  {area:10} {ok}/{total}")
    if args.json:
        rows = [{"area": o.step.area, "args": o.step.args, "ok": o.ok, "why": o.why} for o in report.outcomes]
        Path(args.json).write_text(json.dumps(rows, indent=1))
    base_ok, base_total = report.by_area().get("base", (0, 0))
    return 0 if base_ok == base_total else 1


if __name__ == "__main__":
    sys.exit(main())
