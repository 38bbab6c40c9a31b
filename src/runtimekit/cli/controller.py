"""`runtimekit controller`: switch each node's runtime on or off from its label (docs/user-guide/controller.md)."""

from __future__ import annotations

import argparse
import logging
import sys

from runtimekit._version import DEFAULT_IMAGE
from runtimekit.cli.signals import wait_for_stop_signal

log = logging.getLogger("runtimekit.controller")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    parser.add_argument("--namespace", default="kube-system", help="where the Jobs run (default kube-system)")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"image of the job-agent (default {DEFAULT_IMAGE})")
    parser.add_argument("--protocol", help="protocol.yaml (default: built-in names)")
    parser.add_argument("--job-template", help="a Job manifest template (YAML with {{node}}, {{action}}, ...)")
    parser.add_argument("--trigger", help="module:attribute of a trigger (default: the protocol's enable label)")
    parser.add_argument("--success-ttl", type=float, default=60.0, help="seconds to keep succeeded Jobs")
    parser.add_argument("--failed-history", type=int, default=3, help="failed Jobs kept per node")
    parser.add_argument("--event-namespace", default="default", help="namespace of the Events it records on Nodes")
    parser.add_argument("--leader-elect", action="store_true")
    parser.add_argument("--lease-namespace", default="kube-system")
    parser.add_argument("--identity", help="leader-election identity")


def run(args: argparse.Namespace) -> int:
    import os
    import socket

    from runtimekit.controller.jobs import FileJobTemplate, JobTemplate, Template
    from runtimekit.controller.reconciler import ControllerOptions, NodeController
    from runtimekit.controller.server import ControllerServer
    from runtimekit.controller.trigger import LabelTrigger, Trigger, load_trigger
    from runtimekit.kube.http import KubeConfigError, KubeHttp
    from runtimekit.kube.lease import LeaderElector
    from runtimekit.protocol import ProtocolError, load_protocol

    try:
        protocol = load_protocol(args.protocol)
        template: Template = FileJobTemplate(args.job_template) if args.job_template else JobTemplate()
        trigger: Trigger = load_trigger(args.trigger, protocol) if args.trigger else LabelTrigger(protocol)
    except (ProtocolError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.failed_history < 0 or args.success_ttl < 0:
        print("error: --success-ttl and --failed-history must not be negative", file=sys.stderr)
        return 2
    try:
        http = KubeHttp.connect(args.kubeconfig, user_agent="runtimekit-controller")
    except KubeConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    options = ControllerOptions(
        args.namespace,
        args.image,
        success_ttl=args.success_ttl,
        failed_history=args.failed_history,
        event_namespace=args.event_namespace,
    )
    leader = None
    if args.leader_elect:
        identity = args.identity or f"{socket.gethostname()}-{os.getpid()}"
        leader = LeaderElector(http, "lj-runtimekit-controller", args.lease_namespace, identity)
    log.info("controller starting (protocol fingerprint %s, jobs in %s)", protocol.fingerprint, args.namespace)
    server = ControllerServer(http, NodeController(http, protocol, trigger, template, options), leader).start()
    wait_for_stop_signal()
    server.stop()
    return 0
