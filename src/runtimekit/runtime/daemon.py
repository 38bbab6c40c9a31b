"""Assemble and run the node runtime: backend + isolation + service + gRPC server + reconcile loop.

`build_runtime(options, pods, kubelet, events)` makes a `NodeRuntime` from typed options (the CLI fills them
from flags; `runtimekit up` and tests fill them directly; `mig_mode` and `mig_layout` take the
`--mig-mode` and `--mig-layout` strings, see `runtimekit.runtime.mig`); `RuntimeDaemon` starts it,
serves it on its socket, runs the reconciliation loop every `reconcile_interval_s`, and stops it all
cleanly (`stop()`, idempotent).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from runtimekit.base.threads import Workers
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.attribution import AttributedUsage
from runtimekit.runtime.backend import FaultInjector, GpuBackend, MigControl
from runtimekit.runtime.grpc_server import RuntimeServer, exporter_socket, serve
from runtimekit.runtime.isolation import (
    DEFAULT_HAMI_LIB_DIR,
    DEFAULT_MPS_LOG_DIR,
    DEFAULT_MPS_PIPE_DIR,
    DEFAULT_MPS_SHM_DIR,
    make_isolation,
)
from runtimekit.runtime.mig import parse_mig_config
from runtimekit.runtime.mps import MpsDaemon
from runtimekit.runtime.nvml import NvmlBackend
from runtimekit.runtime.pods import EventSink, PodResourcesSource, PodSource
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend, gpu_count, parse_gpu_spec
from runtimekit.runtime.simusage import SimulatedUsage, usage_annotations
from runtimekit.runtime.usage import UsageSource
from runtimekit.runtime.values import RuntimeSettings

log = logging.getLogger(__name__)

BACKENDS = ("nvml", "simulated")


@dataclass(frozen=True)
class RuntimeOptions:
    backend: str
    socket_path: str
    state_dir: Path
    node_name: str
    protocol: KitProtocol = field(default_factory=KitProtocol.default)
    isolation: str = "none"
    simulate_gpus: str = "8xH200"
    seed: int = 0
    mps_pipe_dir: str = DEFAULT_MPS_PIPE_DIR
    mps_log_dir: str = DEFAULT_MPS_LOG_DIR
    mps_shm_dir: str = DEFAULT_MPS_SHM_DIR
    hami_lib_dir: str = DEFAULT_HAMI_LIB_DIR
    reconcile_interval_s: float = 30.0
    reconcile_grace_s: float = 30.0
    share_event_interval_s: float = 60.0
    mig_mode: str = ""  # --mig-mode: off|static|dynamic, or INDEX:MODE,... (runtimekit.runtime.mig)
    mig_layout: str = ""  # --mig-layout: static layouts, simulated backend only


SIMULATED_MIG_STATE = "simulated-mig.json"  # the simulated GPUs' dynamic MIG devices, in the state dir


def build_backend(options: RuntimeOptions) -> tuple[GpuBackend, FaultInjector | None, MigControl]:
    """The GPU backend named by the options. Raises ValueError or BackendError with the reason."""
    mig = parse_mig_config(options.mig_mode, options.mig_layout)
    if options.backend == "simulated":
        groups = parse_gpu_spec(options.simulate_gpus)
        modes, layouts = mig.expand(gpu_count(groups))
        simulated = SimulatedBackend(
            options.node_name,
            groups,
            seed=options.seed,
            mig_layouts=layouts,
            mig_modes=modes,
            state_file=options.state_dir / SIMULATED_MIG_STATE,
        )
        return simulated, simulated, simulated
    if options.backend == "nvml":
        if mig.default_layout or mig.layouts:
            raise ValueError(
                "--mig-layout is for the simulated backend; partition real GPUs with nvidia-smi mig, or let the "
                "runtime make MIG devices on demand with --mig-mode dynamic"
            )
        nvml = NvmlBackend(mig_config=mig)
        nvml.open()
        return nvml, None, nvml
    raise ValueError(f"unknown backend {options.backend!r}; choose one of {', '.join(BACKENDS)}")


def build_runtime(
    options: RuntimeOptions,
    pods: PodSource | None = None,
    kubelet: PodResourcesSource | None = None,
    events: EventSink | None = None,
) -> NodeRuntime:
    isolation = make_isolation(
        options.isolation,
        options.mps_pipe_dir,
        options.hami_lib_dir,
        options.protocol.rules.memory_scaling,
        options.mps_shm_dir,
    )
    backend, injector, mig = build_backend(options)
    mps = MpsDaemon(options.mps_pipe_dir, options.mps_log_dir) if options.isolation == "mps" else None
    settings = RuntimeSettings(
        node_name=options.node_name,
        state_dir=options.state_dir,
        protocol=options.protocol,
        reconcile_grace_s=options.reconcile_grace_s,
        share_event_interval_s=options.share_event_interval_s,
    )
    usage: UsageSource = (
        AttributedUsage(backend)
        if isinstance(backend, NvmlBackend)
        else SimulatedUsage(usage_annotations(options.protocol.annotations.simulated_runtime))
    )
    return NodeRuntime(
        settings,
        backend,
        isolation,
        mps=mps,
        pods=pods,
        kubelet=kubelet,
        injector=injector,
        mig=mig,
        events=events,
        usage=usage,
    )


class RuntimeDaemon:
    """A started runtime serving on its socket, with its reconciliation loop."""

    def __init__(
        self,
        runtime: NodeRuntime,
        socket_path: str,
        reconcile_interval_s: float = 30.0,
        exporter_socket_path: str | None = "",
        exporter_group: int | None = None,
    ) -> None:
        """`exporter_socket_path`: "" for the default beside the socket (`grpc_server.exporter_socket`),
        None for none; it is mode 0660, its group `exporter_group`, else the runtime's own."""
        self.runtime = runtime
        self.socket_path = socket_path
        self.exporter_socket_path = exporter_socket(socket_path) if exporter_socket_path == "" else exporter_socket_path
        self._exporter_group = exporter_group
        self._interval = reconcile_interval_s
        self._workers = Workers("runtime")
        self._server: RuntimeServer | None = None

    def start(self) -> RuntimeDaemon:
        self.runtime.start()
        self._server = serve(self.runtime, self.socket_path, self.exporter_socket_path, self._exporter_group)
        log.info("runtime serving on %s (exporter socket: %s)", self.socket_path, self.exporter_socket_path or "none")
        if self._interval > 0:
            self._workers.every("runtime-reconcile", self._interval, self.runtime.reconcile)
        return self

    def stop(self, grace_s: float = 1.0) -> None:
        if self._workers.stopped:
            return
        self._workers.stop(5.0)
        if self._server is not None:  # calls in flight finish before the state is closed
            self._server.stop(grace_s)
        self.runtime.close()
        Path(self.socket_path).unlink(missing_ok=True)
        if self.exporter_socket_path:
            Path(self.exporter_socket_path).unlink(missing_ok=True)
        log.info("runtime stopped")
