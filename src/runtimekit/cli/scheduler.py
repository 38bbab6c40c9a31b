"""`runtimekit scheduler`: the GPU-sharing scheduler as a secondary scheduler (docs/user-guide/scheduler.md)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runtimekit.protocol import Protocol
    from runtimekit.scheduler.framework import Framework
    from runtimekit.scheduler.server import SchedulerOptions

from runtimekit.cli.signals import wait_for_stop_signal

log = logging.getLogger("runtimekit.scheduler")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    parser.add_argument("--config", help="scheduler conf in Volcano's format (default: the built-in conf)")
    parser.add_argument("--plugins-dir", help="load actions and plugins from the Python modules in this folder")
    parser.add_argument("--protocol", help="protocol.yaml (default: built-in names)")
    parser.add_argument("--leader-elect", action="store_true", help="hold a Lease; only the holder schedules")
    parser.add_argument("--lease-namespace", default="kube-system")
    parser.add_argument("--lease-name", default="lj-runtimekit-scheduler")
    parser.add_argument("--identity", help="leader-election identity (default: host name and pid)")
    parser.add_argument("--period", type=float, default=0.05, help="shortest time between sessions, seconds")
    parser.add_argument("--bind-workers", type=int, default=8, help="concurrent bind requests")
    parser.add_argument("--seed", type=int, default=0, help="seed for the random policy and node tie order")
    parser.add_argument("--event-qps", type=float, default=50.0, help="Events written per second at most (0: no limit)")
    parser.add_argument("--event-burst", type=int, default=100, help="Events written in a burst at most")
    parser.add_argument(
        "--scheduler-name",
        action="append",
        default=[],
        metavar="NAME",
        help="also take pods whose schedulerName is NAME (repeatable; the protocol's name is always taken)",
    )


def build(args: argparse.Namespace) -> tuple[Protocol, Framework, SchedulerOptions]:
    """Protocol, framework and options from the arguments; raises with a message naming what is wrong."""
    import random

    from runtimekit.protocol import load_protocol
    from runtimekit.scheduler.builtin import builtin_registry
    from runtimekit.scheduler.framework import BuildContext, Framework, load_conf
    from runtimekit.scheduler.framework.arguments import ArgumentError
    from runtimekit.scheduler.server import SchedulerOptions

    if args.event_qps < 0 or args.event_burst < 1:
        raise ArgumentError("--event-qps must be 0 (no limit) or more and --event-burst 1 or more")
    protocol = load_protocol(args.protocol)
    registry = builtin_registry()
    registry.load_entry_points()
    if args.plugins_dir:
        loaded = registry.load_directory(args.plugins_dir)
        log.info("loaded from %s: %s", args.plugins_dir, ", ".join(loaded) or "nothing")
    conf = load_conf(args.config)
    framework = Framework(conf, registry, BuildContext(protocol=protocol, rng=random.Random(args.seed)))
    options = SchedulerOptions(
        period=args.period,
        bind_workers=args.bind_workers,
        event_qps=args.event_qps,
        event_burst=args.event_burst,
        leader_elect=args.leader_elect,
        lease_name=args.lease_name,
        lease_namespace=args.lease_namespace,
        scheduler_names=tuple(args.scheduler_name or ()),
    )
    if args.identity:
        options.identity = args.identity
    return protocol, framework, options


def run(args: argparse.Namespace) -> int:
    from runtimekit.kube.http import KubeHttp
    from runtimekit.protocol import ProtocolError
    from runtimekit.scheduler.collector import tune_process
    from runtimekit.scheduler.framework import ConfError, RegistryError
    from runtimekit.scheduler.framework.arguments import ArgumentError
    from runtimekit.scheduler.server import Scheduler

    try:
        protocol, framework, options = build(args)
    except (ProtocolError, ConfError, RegistryError, ArgumentError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    http = KubeHttp.connect(args.kubeconfig, user_agent=f"runtimekit-scheduler/{protocol.scheduler_name}")
    scheduler = Scheduler(http, framework, protocol, options)
    tune_process()
    scheduler.start()
    wait_for_stop_signal()
    log.info("stopping")
    scheduler.stop()
    return 0
