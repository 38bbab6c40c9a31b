"""`runtimekit scheduler`: the GPU-sharing scheduler as a secondary scheduler (docs/user-guide/scheduler.md).

It takes its own flags and Volcano's (`vc-scheduler`'s, read as Volcano reads them: see
`scheduler_flags.py` and docs/user-guide/coming-from-volcano.md), so Volcano's manifests run it unchanged.
`--check-conf FILE` checks a conf (bare or in a ConfigMap) and prints every problem at once.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from runtimekit.cli.scheduler_flags import FlagError, check_client_flags, go_bool, go_duration, normalise
from runtimekit.cli.signals import wait_for_stop_signal

if TYPE_CHECKING:
    from runtimekit.scheduler.build import AssignmentKeys, LeaderElection, SchedulerConfig
    from runtimekit.scheduler.framework.sampling import NodeSampling

log = logging.getLogger("runtimekit.scheduler")
KEYS_MOUNT = "/var/run/secrets/lj-runtimekit/assignment-key"  # where the kit's manifests mount the Secret


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    add("--master", help="the API server's address (overrides the kubeconfig's; Volcano's flag)")
    add("--config", "--scheduler-conf", dest="config", help="scheduler conf in Volcano's format, bare or a ConfigMap")
    add("--check-conf", metavar="FILE", help="check a conf (bare or a ConfigMap), print every problem, and exit")
    add("--plugins-dir", help="custom actions and plugins: NAME.py here is imported when the conf names NAME")
    add("--protocol", help="protocol.yaml (default: built-in names)")
    add(
        "--scheduler-name",
        action="append",
        dest="scheduler_names",
        metavar="NAME",
        help="also take pods whose schedulerName is NAME (repeatable; the protocol's name is always taken)",
    )
    add("--default-queue", default="default", help="the queue of a pod or PodGroup that names none (default)")
    add("--leader-elect", type=go_bool, default=False, help="hold a Lease; only the holder schedules")
    add(
        "--lease-namespace",
        "--leader-elect-resource-namespace",
        "--lock-object-namespace",
        dest="lease_namespace",
        default="kube-system",
        help="the Lease's namespace (kube-system)",
    )
    add(
        "--lease-name",
        "--leader-elect-resource-name",
        dest="lease_name",
        default=None,
        help="the Lease's name (default: the scheduler name)",
    )
    add("--leader-elect-lease-duration", type=go_duration, default=15.0, help="how long a Lease holds (15s)")
    add("--leader-elect-renew-deadline", type=go_duration, default=10.0, help="leader gives up after (10s)")
    add("--leader-elect-retry-period", type=go_duration, default=2.0, help="renew and retry every (2s)")
    add("--leader-elect-resource-lock", default="leases", help="only 'leases' (Volcano's default)")
    add("--identity", help="leader-election identity (default: host name and pid)")
    add("--period", type=float, default=0.05, help="shortest time between sessions, seconds")
    add("--schedule-period", type=go_duration, default=None, help="the same as a Go duration (Volcano's flag)")
    add("--bind-workers", type=int, default=8, help="concurrent bind requests")
    add("--seed", type=int, default=0, help="seed for the random policy and node tie order")
    add("--event-qps", type=float, default=50.0, help="Events written per second at most (0: no limit)")
    add("--event-burst", type=int, default=100, help="Events written in a burst at most")
    add("--kube-api-qps", type=float, default=2000.0, help="API requests per second at most (2000; 0: no limit)")
    add("--kube-api-burst", type=int, default=2000, help="API requests in a burst at most (2000)")
    add("--enable-healthz", type=go_bool, default=False, help="serve /healthz at --healthz-address")
    add("--healthz-address", default=":11251", help="health check address (:11251)")
    add("--enable-metrics", type=go_bool, default=False, help="serve /metrics at --listen-address")
    add("--listen-address", default=":8080", help="metrics address (:8080)")
    add("--ca-cert-file", help="with --tls-cert-file and --tls-private-key-file: /healthz over TLS")
    add("--tls-cert-file", help="certificate for the health check server")
    add("--tls-private-key-file", help="private key for --tls-cert-file")
    add("--percentage-nodes-to-find", type=int, help="score this percent of the nodes' feasible ones (0: adaptive)")
    add("--minimum-percentage-nodes-to-find", type=int, help="floor of the adaptive percentage (5)")
    add("--minimum-feasible-nodes", type=int, help="feasible nodes to find at least (100)")
    add("--conf-poll", type=float, default=1.0, help="seconds between looks at the conf file (reload)")
    add(
        "--allow-conf-without-gpu-plugin",
        type=go_bool,
        default=False,
        help="apply a reloaded conf that no longer allocates a kind of GPU request (gpushare, mig) pods ask for "
        "(refused by default: they would stay Pending)",
    )
    add("-v", "--v", dest="verbosity", type=int, default=None, help="klog verbosity: 4 or more logs debug lines")
    add("--logtostderr", type=go_bool, default=True, help="logs go to standard error (always)")
    add("--version", type=go_bool, default=False, help="print the version and exit")
    add(
        "--assignment-keys",
        help="folder of the key assignments are signed with (`current` signs; `next` and `previous` while "
        "rotating, docs/security.md#rotation): the Secret "
        f"lj-runtimekit-assignment-key shared with the device plugins (default: {KEYS_MOUNT} when it exists); "
        "required with a GPU plugin in the conf",
    )


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """Parse the kit's flags and Volcano's: pflag syntax first (scheduler_flags.normalise), then
    argparse. What is accepted without effect is kept in `args.flag_warnings`, logged at start."""
    try:
        normalised = normalise(argv)
    except FlagError as exc:
        parser.error(str(exc))
    args, extras = parser.parse_known_args(normalised.args)
    unknown = [e for e in extras if e.startswith("-")]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    warnings = list(normalised.warnings)
    warnings += [f"ignoring the stray argument {e!r} (Volcano ignores it too)" for e in extras]
    if args.leader_elect_resource_lock != "leases":
        warnings.append(f"--leader-elect-resource-lock={args.leader_elect_resource_lock}: a Lease is always used")
    if not args.logtostderr:
        warnings.append("--logtostderr=false: no effect here: logs always go to standard error")
    args.flag_warnings = warnings
    return args


def node_sampling(args: argparse.Namespace) -> NodeSampling | None:
    """Volcano's feasible-node limit when any of its three flags is given (the others at Volcano's
    defaults); None otherwise, so that every feasible node is scored, as before these flags."""
    from runtimekit.scheduler.framework.sampling import NodeSampling

    given = (args.percentage_nodes_to_find, args.minimum_percentage_nodes_to_find, args.minimum_feasible_nodes)
    if all(value is None for value in given):
        return None
    defaults = NodeSampling()
    percentage, minimum_percentage, minimum = given
    return NodeSampling(
        defaults.percentage if percentage is None else percentage,
        defaults.min_percentage if minimum_percentage is None else minimum_percentage,
        defaults.min_nodes if minimum is None else minimum,
    )


def assignment_keys(args: argparse.Namespace) -> AssignmentKeys:
    """--assignment-keys, or the manifests' mount when it exists (the scheduler's and the extender's flag)."""
    from runtimekit.scheduler.build import AssignmentKeys

    return AssignmentKeys(args.assignment_keys or (KEYS_MOUNT if Path(KEYS_MOUNT).is_dir() else None))


def leader_election(args: argparse.Namespace) -> LeaderElection:
    """The leader-election flags kube-scheduler has (the scheduler's and the extender's)."""
    from runtimekit.scheduler.build import LeaderElection

    return LeaderElection(
        args.leader_elect,
        args.lease_namespace,
        args.lease_name,
        args.identity,
        args.leader_elect_lease_duration,
        args.leader_elect_renew_deadline,
        args.leader_elect_retry_period,
    )


def scheduler_config(args: argparse.Namespace) -> SchedulerConfig:
    """The flags as the scheduler's config; raises ArgumentError naming a bad flag, ProtocolError for --protocol."""
    from runtimekit.protocol import load_protocol
    from runtimekit.scheduler.build import Endpoints, KubeConnection, SchedulerConfig
    from runtimekit.scheduler.framework.arguments import ArgumentError

    if args.event_qps < 0 or args.event_burst < 1:
        raise ArgumentError("--event-qps must be 0 (no limit) or more and --event-burst 1 or more")
    problem = check_client_flags(args)
    if problem:
        raise ArgumentError(problem)
    sampling = node_sampling(args)
    return SchedulerConfig(
        kube=KubeConnection(args.kubeconfig, args.master, args.kube_api_qps, args.kube_api_burst),
        conf=args.config,
        reload_conf=True,
        protocol=load_protocol(args.protocol),
        scheduler_names=tuple(args.scheduler_names or ()),
        plugins_dir=args.plugins_dir,
        seed=args.seed,
        keys=assignment_keys(args),
        leader_election=leader_election(args),
        endpoints=Endpoints(
            args.healthz_address if args.enable_healthz else None,
            args.listen_address if args.enable_metrics else None,
            (args.ca_cert_file, args.tls_cert_file, args.tls_private_key_file),
        ),
        default_queue=args.default_queue,
        node_sampling=sampling,
        period=args.period if args.schedule_period is None else args.schedule_period,
        bind_workers=args.bind_workers,
        event_qps=args.event_qps,
        event_burst=args.event_burst,
        conf_poll=args.conf_poll,
        allow_conf_without_gpu_plugin=args.allow_conf_without_gpu_plugin,
    )


def check_command(args: argparse.Namespace) -> int:
    """`--check-conf FILE`: every problem, a line each, then a count; 1 when there are errors."""
    from runtimekit.protocol import ProtocolError, load_protocol
    from runtimekit.scheduler.build import SchedulerConfig, registry_and_context
    from runtimekit.scheduler.framework import RegistryError
    from runtimekit.scheduler.framework.check import check_file

    try:
        config = SchedulerConfig(protocol=load_protocol(args.protocol), plugins_dir=args.plugins_dir, seed=args.seed)
        registry, context = registry_and_context(config)
    except (ProtocolError, RegistryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    checked = check_file(args.check_conf, registry, context)
    for problem in checked.problems.items:
        print(problem)
    errors, warnings = len(checked.problems.errors), len(checked.problems.warnings)
    print(f"{checked.source}: {errors} error(s), {warnings} warning(s)")
    return 1 if errors else 0


def set_verbosity(verbosity: int | None) -> None:
    """klog's -v: 4 and above log debug lines (Volcano logs its details at V(4) and V(5))."""
    if verbosity is not None:
        logging.getLogger().setLevel(logging.DEBUG if verbosity >= 4 else logging.INFO)


def run(args: argparse.Namespace) -> int:
    from runtimekit import __version__

    if args.version:
        print(f"runtimekit scheduler {__version__}")
        return 0
    set_verbosity(args.verbosity)
    for warning in args.flag_warnings:
        log.warning("%s", warning)
    if args.check_conf:
        return check_command(args)
    return serve(args)


def serve(args: argparse.Namespace) -> int:
    from runtimekit.kube.http import KubeConfigError
    from runtimekit.protocol import ProtocolError
    from runtimekit.scheduler.build import ConfCheckFailed, build_scheduler
    from runtimekit.scheduler.collector import freeze_once_synced, tune_process
    from runtimekit.scheduler.framework import ConfError, RegistryError
    from runtimekit.scheduler.framework.arguments import ArgumentError

    try:
        scheduler = build_scheduler(scheduler_config(args))
    except ConfCheckFailed as exc:
        for line in str(exc).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return 2
    except (ProtocolError, ConfError, RegistryError, ArgumentError, KubeConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tune_process()
    scheduler.start()
    freeze_once_synced(scheduler.synced)
    wait_for_stop_signal()
    log.info("stopping")
    scheduler.stop()
    return 0
