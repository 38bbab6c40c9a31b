"""`runtimekit exporter`: Prometheus metrics and GPU health detection for one node (docs/user-guide/exporter.md)."""

from __future__ import annotations

import argparse
import logging
import sys

from runtimekit.cli.signals import wait_for_stop_signal
from runtimekit.cli.socketflags import socket_path

log = logging.getLogger("runtimekit.exporter")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runtime-socket",
        type=socket_path,
        help="the node runtime's exporter socket (default: the protocol's sockets.exporter, exporter/ beside "
        "sockets.runtime: reads and health marks only)",
    )
    parser.add_argument("--listen", default="0.0.0.0:9445", help="host:port for /metrics and /healthz")
    parser.add_argument("--config", help="exporter config file (see etc/exporter.yaml)")
    parser.add_argument("--protocol", help="protocol.yaml (default: built-in names)")
    parser.add_argument(
        "--metrics-compat",
        help="peers' metric names written besides the kit's: dcgm (dcgm-exporter's DCGM_FI_DEV_*), hami (HAMi's), "
        "dcgm,hami, none, or preset (default, or the config's metricsCompat: nvidia preset dcgm, hami preset hami)",
    )
    parser.add_argument("--node-name", default="", help="node label on metrics (default: what the runtime reports)")


def run(args: argparse.Namespace) -> int:
    import msgspec

    from runtimekit.api.runtime_client import RuntimeClient
    from runtimekit.exporter.compat import parse_modes
    from runtimekit.exporter.config import ConfigError, load_config
    from runtimekit.exporter.extensions import ExtensionContext, ExtensionError
    from runtimekit.exporter.health import HealthDetector
    from runtimekit.exporter.registry import build_registry
    from runtimekit.exporter.server import MetricsServer
    from runtimekit.protocol import ProtocolError, load_protocol

    try:
        protocol = load_protocol(args.protocol)
        config = load_config(args.config)
        if args.metrics_compat is not None:
            config = msgspec.structs.replace(config, metrics_compat=parse_modes(args.metrics_compat))
        host, _, port = args.listen.rpartition(":")
        listen = (host or "0.0.0.0", int(port))
    except (ProtocolError, ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    socket = args.runtime_socket or protocol.sockets.exporter
    node = args.node_name or config.node_name
    client = RuntimeClient(socket, timeout_s=config.runtime_timeout_seconds)
    detector = HealthDetector(client, config.health, node)
    try:
        registry = build_registry(ExtensionContext(client, protocol, config, node), detector)
    except ExtensionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        client.close()
        return 2
    try:
        server = MetricsServer(registry, *listen).start()
    except OSError as exc:
        print(f"error: cannot listen on {args.listen}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if config.health.enabled:
        detector.start()
    log.info(
        "exporter serving http://%s/metrics for runtime %s (protocol fingerprint %s)",
        server.address,
        socket,
        protocol.fingerprint,
    )
    wait_for_stop_signal()
    detector.stop()
    server.stop()
    client.close()
    return 0
