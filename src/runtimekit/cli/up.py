"""`runtimekit up`: a whole GPU cluster on this machine (docs/user-guide/embedded-cluster.md).

Starts the embedded API server, the simulated nodes (each with a runtime, the device plugin and a
simulated kubelet, or with `--direct` only a kubelet advertising the GPUs itself), the Job
controller, the workload controllers (Deployments, ReplicaSets, StatefulSets, Volcano Jobs, garbage
collection), the scheduler (answering to the protocol's scheduler name and its aliases,
`default-scheduler` and each `--scheduler-name`), the node controller and the kit's admission webhook
(`--no-webhook` leaves it out; `runtimekit.cli.embedded`), writes
`DIR/kubeconfig` and `DIR/cluster.json`, and prints exactly one line on stdout,
`ready: <kubeconfig>`, once nodes are Ready with their GPUs advertised and the scheduler has seen
them. `--protocol` takes a protocol file or a preset's name (`--protocol hami`: HAMi's manifests run
unchanged; docs/user-guide/coming-from-hami.md). Runs until SIGINT/SIGTERM, then stops everything and
exits 0. Exits 2 for bad options or a cluster that does not come up (the reason on stderr).
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
from pathlib import Path

log = logging.getLogger("runtimekit.up")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=4, help="simulated GPU nodes (default 4)")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    parser.add_argument(
        "--gpu-model",
        default="H200",
        help="GPU model of every node (default H200), or several taken in turn over the nodes: A100-80GB,H200",
    )
    parser.add_argument("--port", type=int, default=0, help="API server port (default: a free one)")
    parser.add_argument(
        "--state-dir", help="kubeconfig, cluster.json, API objects and node state (default: a temp folder)"
    )
    parser.add_argument("--direct", action="store_true", help="nodes advertise GPUs themselves: no runtime or plugin")
    parser.add_argument("--isolation", choices=["none", "mps", "hami-core"], default="none", help="runtime isolation")
    parser.add_argument(
        "--mig-mode",
        default="",
        help="MIG mode of the nodes' GPUs: off|static|dynamic, or INDEX:MODE,... (docs/user-guide/mig.md)",
    )
    parser.add_argument(
        "--mig-layout", default="", help="MIG profiles of static GPUs: 3g.40gb,2g.20gb,... or INDEX:PROFILES;..."
    )
    parser.add_argument(
        "--memory-unit",
        default="",
        help="gpu-memory unit of the nodes: 512Mi for all, or NODE=UNIT,... (default: the protocol's memoryUnit)",
    )
    parser.add_argument("--scheduler-conf", help="scheduler conf (default: examples/scheduler/gpushare.conf)")
    parser.add_argument(
        "--scheduler-name",
        action="append",
        default=[],
        metavar="NAME",
        help="the scheduler answers to the protocol's scheduler name and to default-scheduler (so pods with "
        "no schedulerName are scheduled); each --scheduler-name adds a name, e.g. volcano (repeatable)",
    )
    parser.add_argument(
        "--scheduler-plugins-dir", help="the scheduler's --plugins-dir (NAME.py there loads when its conf names NAME)"
    )
    parser.add_argument(
        "--protocol",
        help="protocol.yaml, or a preset under which another system's manifests run unchanged: hami, gpushare, "
        "volcano-vgpu or nvidia (runtimekit protocol preset; default: built-in names)",
    )
    parser.add_argument("--ready-timeout", type=float, default=120.0, help="seconds to wait for the cluster")
    parser.add_argument("--no-exporter", action="store_true", help="do not run an exporter per node")
    parser.add_argument(
        "--dra",
        action="store_true",
        help="run the DRA kubelet plugin on every node; kubelets prepare pods' ResourceClaims through it "
        "(docs/user-guide/dra-plugin.md; not with --direct)",
    )
    parser.add_argument(
        "--no-webhook",
        action="store_true",
        help="do not run the kit's admission webhook (docs/user-guide/webhook.md), nor register it",
    )


def run(args: argparse.Namespace) -> int:
    from runtimekit.cli.embedded import ClusterOptions, start_cluster
    from runtimekit.cli.node_exporter import start_node_exporter
    from runtimekit.cli.signals import catch_stop_signals
    from runtimekit.protocol import ProtocolError

    options = ClusterOptions(
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        gpu_model=args.gpu_model,
        port=args.port,
        state_dir=Path(args.state_dir) if args.state_dir else None,
        direct=args.direct,
        isolation=args.isolation,
        mig_mode=args.mig_mode,
        mig_layout=args.mig_layout,
        memory_unit=args.memory_unit,
        scheduler_conf=args.scheduler_conf,
        scheduler_names=("default-scheduler", *args.scheduler_name),
        scheduler_plugins_dir=args.scheduler_plugins_dir,
        protocol_path=args.protocol,
        exporter=None if args.no_exporter else start_node_exporter,
        webhook=not args.no_webhook,
        dra=args.dra,
    )
    try:
        cluster = start_cluster(options, ready_timeout_s=args.ready_timeout)
    except (ValueError, ProtocolError, TimeoutError, OSError, RuntimeError) as exc:
        print(f"error: cannot start the embedded cluster: {exc}", file=sys.stderr)
        return 2
    log.info("API server %s, %d nodes; state in %s", cluster.url, len(cluster.nodes), cluster.state_dir)
    with catch_stop_signals() as stop:  # before `ready:`, so a SIGTERM sent on seeing it still stops cleanly
        print(f"ready: {cluster.kubeconfig}", flush=True)
        signum = stop.wait()
    log.info("signal %d: stopping", signum)
    cluster.stop()
    # Everything is stopped: spare the interpreter's final collection over the cluster's hundred
    # thousand objects, which took about as long (~1 s) as stopping the cluster itself.
    gc.freeze()
    return 0
