"""The simulated containers of one pod, run by run: their state, restarts, back-off and logs.

`PodContainers(pod, env, hostname)` keeps, per container, its current run and the previous one
(`kubectl logs --previous`), its restart count and whether it waits in back-off. `SimulatedKubelet`
drives it: `start(name, now)` begins a run (the plan from `simulate.plan`), `end(name, how, now)`
ends it, `restart_delay(name)` says when kubelet would start it again (None: it stays terminated,
by the pod's `restartPolicy`); `statuses(now)` gives the `containerStatuses` and `phase_if_done()`
the pod's phase once no container will run again. `log(name, previous, now)` gives the lines a
run printed so far, with their times: the source of the API server's `pods/log`.
Back-off follows kubelet: the first restart at once, then 10 s, 20 s, 40 s … up to 5 minutes.
Not thread-safe on its own: the kubelet reads and writes it under its lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from runtimekit.base.timestamps import rfc3339
from runtimekit.cluster.kubelet.simulate import Plan, plan
from runtimekit.cluster.kubelet.status import Terminated, container_id
from runtimekit.kube.objects import Container, ContainerStatus, JsonObject, Pod, meta

MAX_BACKOFF_S = 300.0
MAX_LOG_LINES = 10_000  # per run; a simulated container prints little, this bounds a runaway script
GPU_ENV_PREFIXES = ("NVIDIA_", "CUDA_", "GPU_", "RUNTIMEKIT_")


@dataclass
class Run:
    """One run of a container: when it started (epoch seconds), what it does, how it ended."""

    started: float
    plan: Plan
    env_line: str = ""
    ended: Terminated | None = None
    ended_at: float | None = None

    def lines(self, now: float) -> list[tuple[float, str]]:
        """What it printed up to `now` (or its end), with each line's time."""
        until = now if self.ended_at is None else min(now, self.ended_at)
        out = [(self.started, self.env_line)] if self.env_line else []
        out += [(self.started + o.at_s, o.text) for o in self.plan.output if self.started + o.at_s <= until]
        return out[:MAX_LOG_LINES]


@dataclass
class ContainerRuns:
    spec: Container
    current: Run | None = None
    previous: Run | None = None
    restarts: int = 0
    backoff_s: float = 0.0  # the back-off it waits in (CrashLoopBackOff), 0 when not waiting
    final: bool = False  # ended for good (the annotation, a runner, the pod stopped)


def env_line(name: str, env: Mapping[str, str]) -> str:
    """The log line saying which GPUs (and limits) the runtime gave the container; "" without any."""
    gpu = {k: v for k, v in sorted(env.items()) if k.startswith(GPU_ENV_PREFIXES)}
    if not gpu:
        return ""
    return f"[runtimekit] simulated container {name}: " + " ".join(f"{k}={v}" for k, v in gpu.items())


@dataclass
class PodContainers:
    """See the module docstring."""

    pod: Pod
    env: Mapping[str, Mapping[str, str]]  # container name → what the runtime gave it
    hostname: str
    initial_backoff_s: float = 10.0
    containers: dict[str, ContainerRuns] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for spec in (self.pod.get("spec") or {}).get("containers") or []:
            self.containers[str(spec.get("name", ""))] = ContainerRuns(spec)

    @property
    def restart_policy(self) -> str:
        return str((self.pod.get("spec") or {}).get("restartPolicy") or "Always")

    def container_env(self, name: str) -> dict[str, str]:
        spec = self.containers[name].spec
        given = {str(e.get("name", "")): str(e.get("value", "")) for e in spec.get("env") or [] if "value" in e}
        return {"HOSTNAME": self.hostname, **given, **self.env.get(name, {})}

    def start(self, name: str, now: float, forever: bool = False) -> Run:
        """A new run of the container (`forever`: whatever its command, until ended from outside)."""
        runs = self.containers[name]
        env = self.container_env(name)
        what = plan(runs.spec, env, self.hostname)
        if forever:
            what = Plan(what.output, None)
        if runs.current is not None:
            runs.previous = runs.current
            runs.restarts += 1
        runs.current = Run(now, what, env_line(name, self.env.get(name, {})))
        runs.backoff_s = 0.0
        return runs.current

    def end(self, name: str, how: Terminated, now: float, final: bool = False) -> None:
        runs = self.containers[name]
        if runs.current is not None and runs.current.ended is None:
            runs.current.ended, runs.current.ended_at = how, now
        runs.final = runs.final or final

    def restart_delay(self, name: str) -> float | None:
        """When kubelet starts the ended container again (seconds from now), None when it does not;
        a delay puts the container in back-off (CrashLoopBackOff) until `start`."""
        runs = self.containers[name]
        ended = runs.current.ended if runs.current is not None else None
        if runs.final or ended is None:
            return None
        policy = self.restart_policy
        if policy == "Never" or (policy == "OnFailure" and ended.exit_code == 0):
            return None
        delay = 0.0 if runs.restarts == 0 else min(self.initial_backoff_s * 2 ** (runs.restarts - 1), MAX_BACKOFF_S)
        runs.backoff_s = delay
        return delay

    def phase_if_done(self) -> str | None:
        """Succeeded or Failed once every container has ended for good; None while one runs or will."""
        ends: list[Terminated] = []
        for runs in self.containers.values():
            ended = runs.current.ended if runs.current is not None else None
            if ended is None or runs.backoff_s or not (runs.final or self._stays_ended(runs, ended)):
                return None
            ends.append(ended)
        return "Succeeded" if all(e.exit_code == 0 for e in ends) else "Failed"

    def _stays_ended(self, runs: ContainerRuns, ended: Terminated) -> bool:
        policy = self.restart_policy
        return policy == "Never" or (policy == "OnFailure" and ended.exit_code == 0)

    def waiting_message(self, name: str) -> str:
        pod_meta = meta(self.pod)
        who = f"{pod_meta.get('name', '')}_{pod_meta.get('namespace', 'default')}({pod_meta.get('uid', '')})"
        return f"back-off {_go_seconds(self.containers[name].backoff_s)} restarting failed container={name} pod={who}"

    def statuses(self) -> list[ContainerStatus]:
        uid = str(meta(self.pod).get("uid", ""))
        return [self._status(uid, name, runs) for name, runs in self.containers.items()]

    def _status(self, uid: str, name: str, runs: ContainerRuns) -> ContainerStatus:
        status: ContainerStatus = {
            "name": name,
            "image": str(runs.spec.get("image", "")),
            "imageID": "",
            "containerID": container_id(uid, name),
            "ready": False,
            "started": False,
            "restartCount": runs.restarts,
        }
        current = runs.current
        state: JsonObject
        if current is None:
            state = {"waiting": {"reason": "ContainerCreating"}}
        elif runs.backoff_s and current.ended is not None:
            state = {"waiting": {"reason": "CrashLoopBackOff", "message": self.waiting_message(name)}}
            status["lastState"] = {"terminated": _terminated(current, uid, name)}
        elif current.ended is not None:
            state = {"terminated": _terminated(current, uid, name)}
        else:
            state = {"running": {"startedAt": rfc3339(current.started)}}
            status["ready"] = status["started"] = True
        if "lastState" not in status and runs.previous is not None:
            status["lastState"] = {"terminated": _terminated(runs.previous, uid, name)}
        status["state"] = state
        return status

    def log(self, name: str, previous: bool, now: float) -> list[tuple[float, str]] | None:
        """The lines of the container's current (or previous) run; None when there is no such run."""
        runs = self.containers.get(name)
        run = None if runs is None else (runs.previous if previous else runs.current)
        if previous and runs is not None and runs.backoff_s:  # in back-off, the last run is the previous one
            run = runs.current
        return None if run is None else run.lines(now)

    def planned_exit(self, name: str) -> int:
        """The exit code the container's current run ends with, by its command."""
        current = self.containers[name].current
        return 0 if current is None else current.plan.exit_code

    def running(self, name: str) -> bool:
        runs = self.containers.get(name)
        return runs is not None and runs.current is not None and runs.current.ended is None


def _terminated(run: Run, uid: str, name: str) -> JsonObject:
    ended = run.ended or Terminated(0)
    return ended.as_state(rfc3339(run.started), rfc3339(run.ended_at or run.started), container_id(uid, name))


def _go_seconds(seconds: float) -> str:
    """A whole number of seconds as Go prints a Duration (`10s`, `1m20s`, `5m0s`)."""
    whole = int(seconds)
    return f"{whole // 60}m{whole % 60}s" if whole >= 60 else f"{whole}s"
