"""`runtimekit extender`: the kit's scheduler as a kube-scheduler HTTP extender (docs/user-guide/extender.md).

kube-scheduler stays the cluster's scheduler and calls `<url-prefix>/filter`, `/prioritize`, `/bind`
and `/preempt` for the pods that ask for the kit's resources; the extender answers with the same
plugins, policies and ledger as `runtimekit scheduler`. `--print-kube-scheduler-config URL` prints the
KubeSchedulerConfiguration that wires an extender at URL into kube-scheduler, and exits.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from runtimekit.cli.scheduler import KEYS_MOUNT, assignment_keys, leader_election, set_verbosity
from runtimekit.cli.scheduler_flags import check_client_flags, go_bool, go_duration
from runtimekit.cli.signals import wait_for_stop_signal

if TYPE_CHECKING:
    from runtimekit.scheduler.build import ExtenderConfig

log = logging.getLogger("runtimekit.extender")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    add("--master", help="the API server's address (overrides the kubeconfig's)")
    add("--listen", default=":8888", help="where to serve the verbs, /healthz, /readyz and /metrics (:8888)")
    add("--url-prefix", default="/lj-runtimekit", help="the path of kube-scheduler's urlPrefix (/lj-runtimekit)")
    add("--conf", "--config", dest="conf", help="conf in Volcano's format (default: gpushare and mig only)")
    add("--protocol", help="protocol.yaml (default: built-in names)")
    add("--plugins-dir", help="custom actions and plugins: NAME.py here is imported when the conf names NAME")
    add(
        "--scheduler-name",
        action="append",
        dest="scheduler_names",
        metavar="NAME",
        help="also bind pods whose schedulerName is NAME: a kube-scheduler profile that calls the extender "
        "(repeatable; the protocol's name is always taken)",
    )
    add(
        "--assignment-keys",
        help="folder of the key assignments are signed with (the Secret lj-runtimekit-assignment-key; "
        f"default: {KEYS_MOUNT} when it exists); required with a GPU plugin in the conf",
    )
    add(
        "--leader-elect",
        nargs="?",
        const=True,
        type=go_bool,
        default=False,
        help="hold a Lease; only the holder serves (others are not ready)",
    )
    add("--lease-namespace", default="kube-system", help="the Lease's namespace (kube-system)")
    add("--lease-name", default=None, help="the Lease's name (lj-runtimekit-extender)")
    add("--leader-elect-lease-duration", type=go_duration, default=15.0, help="how long a Lease holds (15s)")
    add("--leader-elect-renew-deadline", type=go_duration, default=10.0, help="leader gives up after (10s)")
    add("--leader-elect-retry-period", type=go_duration, default=2.0, help="renew and retry every (2s)")
    add("--identity", help="leader-election identity (default: host name and pid)")
    add("--bind-wait", type=go_duration, default=1.0, help="how long a bind waits for a pod not seen yet (1s)")
    add("--kube-api-qps", type=float, default=2000.0, help="API requests per second at most (2000; 0: no limit)")
    add("--kube-api-burst", type=int, default=2000, help="API requests in a burst at most (2000)")
    add("--seed", type=int, default=0, help="seed for the random policy and node tie order")
    add("-v", "--v", dest="verbosity", type=int, default=None, help="4 or more logs debug lines")
    add(
        "--print-kube-scheduler-config",
        metavar="URL",
        help="print the KubeSchedulerConfiguration that calls an extender at URL (its urlPrefix) and exit",
    )
    add(
        "--node-cache-capable",
        nargs="?",
        const=True,
        type=go_bool,
        default=True,
        help="with --print-kube-scheduler-config: whether kube-scheduler sends node names only (true)",
    )


def extender_config(args: argparse.Namespace) -> ExtenderConfig:
    """The flags as the extender's config; raises ArgumentError naming a bad flag, ProtocolError for --protocol."""
    from runtimekit.protocol import load_protocol
    from runtimekit.scheduler.build import ExtenderConfig, KubeConnection, SchedulerConfig
    from runtimekit.scheduler.extender.schedconfig import DEFAULT_LISTEN
    from runtimekit.scheduler.framework.arguments import ArgumentError

    problem = check_client_flags(args)
    if problem:
        raise ArgumentError(problem)
    if args.bind_wait < 0:
        raise ArgumentError("--bind-wait must not be negative")
    if not args.url_prefix.startswith("/"):
        raise ArgumentError(f"--url-prefix {args.url_prefix!r}: a path, starting with /")
    scheduler = SchedulerConfig(
        kube=KubeConnection(args.kubeconfig, args.master, args.kube_api_qps, args.kube_api_burst),
        conf=args.conf,
        protocol=load_protocol(args.protocol),
        scheduler_names=tuple(args.scheduler_names or ()),
        plugins_dir=args.plugins_dir,
        seed=args.seed,
        keys=assignment_keys(args),
        leader_election=leader_election(args),
    )
    return ExtenderConfig(scheduler, args.listen or DEFAULT_LISTEN, args.url_prefix, args.bind_wait)


def print_kube_scheduler_config(args: argparse.Namespace) -> int:
    from runtimekit.protocol import ProtocolError, load_protocol
    from runtimekit.scheduler.extender.schedconfig import kube_scheduler_config_text

    try:
        protocol = load_protocol(args.protocol)
    except ProtocolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    url = args.print_kube_scheduler_config
    sys.stdout.write(kube_scheduler_config_text(protocol, url, node_cache_capable=args.node_cache_capable))
    return 0


def run(args: argparse.Namespace) -> int:
    set_verbosity(args.verbosity)
    if args.print_kube_scheduler_config:
        return print_kube_scheduler_config(args)
    from runtimekit.kube.http import KubeConfigError
    from runtimekit.protocol import ProtocolError
    from runtimekit.scheduler.build import ConfCheckFailed, build_extender
    from runtimekit.scheduler.collector import tune_process
    from runtimekit.scheduler.framework import ConfError, RegistryError
    from runtimekit.scheduler.framework.arguments import ArgumentError

    try:
        extender = build_extender(extender_config(args))
    except ConfCheckFailed as exc:
        for line in str(exc).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return 2
    except (ProtocolError, ConfError, RegistryError, ArgumentError, KubeConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tune_process()
    extender.start()
    wait_for_stop_signal()
    log.info("stopping")
    extender.stop()
    return 0
