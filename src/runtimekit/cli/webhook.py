"""`runtimekit webhook`: the kit's admission webhook (docs/user-guide/webhook.md).

Serves `/mutate`, `/validate` and `/healthz` over HTTPS with the certificate files given (read again
when they change), watches the nodes' GPU inventories with the kubeconfig (or the in-cluster
ServiceAccount) for the memory checks, and stops on SIGINT/SIGTERM. Exits 2 for bad options, files
that do not load, or no usable connection to the API server.
"""

from __future__ import annotations

import argparse
import logging
import ssl
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from runtimekit.cli.signals import catch_stop_signals

if TYPE_CHECKING:
    from runtimekit.protocol import KitProtocol

log = logging.getLogger("runtimekit.webhook")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", default="0.0.0.0:9443", help="HOST:PORT to serve HTTPS on (default 0.0.0.0:9443)")
    parser.add_argument(
        "--tls-cert-file", required=True, help="PEM certificate (chain) to serve; re-read when it changes"
    )
    parser.add_argument("--tls-private-key-file", required=True, help="PEM private key of the certificate")
    parser.add_argument(
        "--kubeconfig", help="kubeconfig (default: $KUBECONFIG, the in-cluster ServiceAccount, ~/.kube/config)"
    )
    parser.add_argument("--protocol", help="protocol.yaml or a preset's name: hami, gpushare, volcano-vgpu, nvidia")
    parser.add_argument(
        "--scheduler-mode",
        choices=["standalone", "extender"],
        default="standalone",
        help="standalone: pods asking for GPUs get the kit's schedulerName; extender: they get the kube-scheduler "
        "profile that calls the kit's extender (--extender-profile)",
    )
    parser.add_argument(
        "--extender-profile",
        default="",
        metavar="NAME",
        help="extender mode: the schedulerName of the kube-scheduler profile that calls the extender (default: the "
        "protocol's scheduler name, as deploy/scheduler/extender names it; default-scheduler leaves pods alone, "
        "for a cluster whose own kube-scheduler calls the extender)",
    )
    parser.add_argument(
        "--runtime-class-name",
        default="",
        metavar="NAME",
        help="the RuntimeClass a GPU pod naming none is given (HAMi's runtimeClassName; default: none), for nodes "
        "whose default container runtime is not NVIDIA's",
    )
    parser.add_argument(
        "--overwrite-env",
        action="store_true",
        help="containers asking for no GPU get NVIDIA_VISIBLE_DEVICES=none (HAMi's overwriteEnv), so NVIDIA's "
        "runtime shows them no GPU whatever their image says",
    )
    parser.add_argument(
        "--scheduler-username",
        action="append",
        default=[],
        metavar="USER",
        help="who may write the assignment annotations: the kit scheduler's ServiceAccount user (default "
        "system:serviceaccount:kube-system:lj-runtimekit-scheduler; repeatable)",
    )


def _protocol(value: str | None) -> KitProtocol:
    from runtimekit.protocol import load_protocol
    from runtimekit.protocol.presets import PRESETS, preset_protocol

    if value and value in PRESETS and not Path(value).exists():
        return preset_protocol(value)
    return load_protocol(value)


def run(args: argparse.Namespace) -> int:
    from runtimekit.kube.http import KubeConfigError, KubeHttp
    from runtimekit.kube.informer import Informer
    from runtimekit.protocol import ProtocolError
    from runtimekit.webhook.fleet import FleetView
    from runtimekit.webhook.server import WebhookServer
    from runtimekit.webhook.settings import SCHEDULER_USER, SchedulerMode, WebhookSettings
    from runtimekit.webhook.tlsfiles import ServingCertificate

    try:
        protocol = _protocol(args.protocol)
        host, _, port = args.listen.rpartition(":")
        listen = (host.strip("[]") or "0.0.0.0", int(port))
        tls = ServingCertificate(args.tls_cert_file, args.tls_private_key_file)
        http = KubeHttp.connect(args.kubeconfig, user_agent="runtimekit-webhook")
    except ssl.SSLError as exc:
        print(f"error: cannot load {args.tls_cert_file} and {args.tls_private_key_file}: {exc}", file=sys.stderr)
        return 2
    except (ProtocolError, KubeConfigError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    users = frozenset(args.scheduler_username or [SCHEDULER_USER])
    settings = WebhookSettings(
        protocol,
        SchedulerMode(args.scheduler_mode),
        users,
        args.extender_profile,
        args.runtime_class_name,
        args.overwrite_env,
    )
    view = FleetView(protocol)
    nodes = Informer(http, "/api/v1/nodes", view.on_event, name="nodes").start()
    try:
        server = WebhookServer(settings, tls, view.fleet, *listen, ready=nodes.synced.is_set).start()
    except OSError as exc:
        print(f"error: cannot listen on {args.listen}: {exc.strerror or exc}", file=sys.stderr)
        nodes.stop()
        return 2
    log.info(
        "webhook serving %s (/mutate, /validate; %s mode; protocol fingerprint %s)",
        server.url,
        settings.mode.value,
        protocol.fingerprint,
    )
    with catch_stop_signals() as stop:
        stop.wait()
    server.stop()
    nodes.stop()
    http.close()
    return 0
