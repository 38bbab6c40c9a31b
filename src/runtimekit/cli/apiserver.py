"""`runtimekit apiserver`: run the embedded Kubernetes API server alone, for debugging or to point
kubectl at (docs/user-guide/embedded-cluster.md). Stops on SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import logging

from runtimekit.cli.signals import catch_stop_signals
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.server import DEFAULT_VERSION
from runtimekit.cluster.apiserver.store import DEFAULT_HISTORY_BYTES

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port to listen on, 0 for any free port (default 8080)")
    parser.add_argument("--state-dir", help="keep objects in SQLite under this folder across restarts")
    parser.add_argument(
        "--kubernetes-version", default=DEFAULT_VERSION, help=f"version /version reports (default {DEFAULT_VERSION})"
    )
    parser.add_argument("--kubeconfig-out", help="write a kubeconfig for the server to this path")
    parser.add_argument(
        "--history-size", type=int, default=100_000, help="watch events kept for resuming watches (default 100000)"
    )
    parser.add_argument(
        "--history-bytes",
        type=int,
        default=DEFAULT_HISTORY_BYTES,
        help=f"bytes of object versions and watch lines the history keeps (default {DEFAULT_HISTORY_BYTES})",
    )
    parser.add_argument(
        "--bookmark-interval", type=float, default=60.0, help="seconds between watch bookmarks (default 60)"
    )


def run(args: argparse.Namespace) -> int:
    try:
        server = ApiServer(
            host=args.host,
            port=args.port,
            kubernetes_version=args.kubernetes_version,
            state_dir=args.state_dir,
            history_size=args.history_size,
            history_bytes=args.history_bytes,
            bookmark_interval=args.bookmark_interval,
        ).start()
    except (ValueError, RuntimeError) as exc:
        log.error("cannot start the API server: %s", exc)
        return 2
    try:
        if args.kubeconfig_out:
            path = server.write_kubeconfig(args.kubeconfig_out)
            log.info("kubeconfig written to %s (kubectl --kubeconfig %s get nodes)", path, path)
        with catch_stop_signals() as stop:  # before printing the URL: a SIGTERM on seeing it stops cleanly
            print(server.url, flush=True)
            stop.wait()
    finally:
        server.close()
    return 0
