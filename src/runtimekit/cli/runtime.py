"""`runtimekit runtime`: the node runtime daemon (GPU discovery, health, allocation, isolation, gRPC API).

Runs until SIGINT/SIGTERM, then stops serving and exits 0. Exits 2 for bad flags or a backend that
cannot start (e.g. `--backend nvml` without a driver).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from runtimekit.api.kubelet import POD_RESOURCES_SOCKET
from runtimekit.api.podresources_client import PodResourcesClient
from runtimekit.cli.signals import wait_for_stop_signal
from runtimekit.cli.socketflags import socket_path
from runtimekit.protocol import ProtocolError, load_protocol
from runtimekit.runtime.backend import BackendError
from runtimekit.runtime.daemon import BACKENDS, RuntimeDaemon, RuntimeOptions, build_runtime
from runtimekit.runtime.isolation import (
    DEFAULT_HAMI_LIB_DIR,
    DEFAULT_MPS_LOG_DIR,
    DEFAULT_MPS_PIPE_DIR,
    DEFAULT_MPS_SHM_DIR,
    ISOLATIONS,
)
from runtimekit.runtime.pods import PodResourcesSource

if TYPE_CHECKING:
    from runtimekit.kube.nodeapi import KubeNodeApi

log = logging.getLogger("runtimekit.runtime")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=BACKENDS, required=True, help="real GPUs (nvml) or simulated ones")
    parser.add_argument(
        "--socket", type=socket_path, help="unix socket to serve on (default: sockets.runtime of the protocol)"
    )
    parser.add_argument("--state-dir", default="/var/lib/lj-runtimekit/runtime", help="checkpoint and on/off state")
    parser.add_argument("--isolation", choices=ISOLATIONS, default="none", help="how shares are enforced")
    parser.add_argument("--simulate-gpus", default="8xH200", help="simulated GPUs, e.g. 8xH200 or 4xA100-80GB,4xT4")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulated metrics")
    parser.add_argument(
        "--mig-mode",
        default="",
        help="MIG mode per GPU: off, static or dynamic for all, or INDEX:MODE,... with an optional bare default "
        "(e.g. 0:dynamic,1:static or dynamic,0:off); real GPUs keep their hardware MIG setting, this picks "
        "static (list) or dynamic (make on demand) for those with MIG enabled",
    )
    parser.add_argument(
        "--mig-layout",
        default="",
        help="simulated static MIG layouts: PROFILES for every static GPU, or INDEX:PROFILES;... "
        "(e.g. 3g.40gb,2g.20gb,1g.10gb,1g.10gb or 0:3g.40gb,3g.40gb;1:7g.80gb)",
    )
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME") or socket.gethostname())
    parser.add_argument("--protocol", help="protocol.yaml (default: built-in defaults)")
    parser.add_argument(
        "--kubeconfig",
        help="API server access for reconciliation and checkpoint recovery: a kubeconfig file or a URL "
        "(default: in-cluster when running in a pod, else none)",
    )
    parser.add_argument(
        "--pod-resources-socket",
        type=socket_path,
        default=POD_RESOURCES_SOCKET,
        help="kubelet's PodResources socket, used when it exists ('' to ignore)",
    )
    parser.add_argument(
        "--exporter-socket",
        type=socket_path,
        help="the socket serving the exporter's part of the API (reads and health marks only; default: "
        "exporter/ beside --socket, the protocol's sockets.exporter; '' for none)",
    )
    parser.add_argument(
        "--exporter-socket-group",
        type=int,
        help="numeric group owning the exporter socket, mode 0660 (default: the runtime's own group)",
    )
    parser.add_argument("--reconcile-interval", type=float, default=30.0, help="seconds between reconciliations")
    parser.add_argument("--reconcile-grace", type=float, default=30.0, help="never release an allocation younger")
    parser.add_argument(
        "--share-event-interval",
        type=float,
        default=60.0,
        help="seconds between GPUShareExceeded Events (counted on one) while a container stays over its share",
    )
    parser.add_argument("--mps-pipe-dir", default=DEFAULT_MPS_PIPE_DIR)
    parser.add_argument("--mps-log-dir", default=DEFAULT_MPS_LOG_DIR)
    parser.add_argument(
        "--mps-shm-dir",
        default=DEFAULT_MPS_SHM_DIR,
        help="host folder that is the MPS daemon's /dev/shm, mounted at /dev/shm in each MPS container "
        "(default: the host's /dev/shm, the runtime's own under hostIPC)",
    )
    parser.add_argument("--hami-lib-dir", default=DEFAULT_HAMI_LIB_DIR, help="host folder holding libvgpu.so")


def _pod_source(kubeconfig: str | None) -> KubeNodeApi | None:
    if kubeconfig is None and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        log.warning("no --kubeconfig and not in a cluster: no reconciliation against the API server")
        return None
    from runtimekit.kube.nodeapi import KubeNodeApi

    return KubeNodeApi.connect(kubeconfig)


def _kubelet(path: str) -> PodResourcesSource | None:
    if path and Path(path).exists():
        return PodResourcesClient(path)
    if path:
        log.info("no PodResources socket at %s; reconciling against the API server only", path)
    return None


def run(args: argparse.Namespace) -> int:
    try:
        protocol = load_protocol(args.protocol)
    except ProtocolError as exc:
        log.error("%s", exc)
        return 2
    options = RuntimeOptions(
        backend=args.backend,
        socket_path=args.socket or protocol.sockets.runtime,
        state_dir=Path(args.state_dir),
        node_name=args.node_name,
        protocol=protocol,
        isolation=args.isolation,
        simulate_gpus=args.simulate_gpus,
        seed=args.seed,
        mps_pipe_dir=args.mps_pipe_dir,
        mps_log_dir=args.mps_log_dir,
        mps_shm_dir=args.mps_shm_dir,
        hami_lib_dir=args.hami_lib_dir,
        reconcile_interval_s=args.reconcile_interval,
        reconcile_grace_s=args.reconcile_grace,
        share_event_interval_s=args.share_event_interval,
        mig_mode=args.mig_mode,
        mig_layout=args.mig_layout,
    )
    log.info("protocol %s (fingerprint %s)", args.protocol or "<defaults>", protocol.fingerprint)
    try:
        api = _pod_source(args.kubeconfig)
        runtime = build_runtime(options, api, _kubelet(args.pod_resources_socket), api)
        exporter_socket = "" if args.exporter_socket is None else (args.exporter_socket or None)
        daemon = RuntimeDaemon(
            runtime, options.socket_path, options.reconcile_interval_s, exporter_socket, args.exporter_socket_group
        ).start()
    except (ValueError, BackendError, OSError) as exc:
        log.error("cannot start the runtime: %s", exc)
        return 2
    signum = wait_for_stop_signal()
    log.info("signal %d: stopping", signum)
    daemon.stop()
    return 0
