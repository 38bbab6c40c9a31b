"""`runtimekit dra-plugin`: the DRA kubelet plugin, preparing ResourceClaims through the node runtime.

Publishes the node's GPUs as ResourceSlices of the driver (`gpu.runtimekit.aliyun.com`; NVIDIA's
`gpu.nvidia.com` under the `nvidia` preset), installs its DeviceClasses unless they exist, serves the
DRAPlugin service (v1 and v1beta1) on `<plugin-dir>/<driver>/dra.sock` and registers through
`<registry-dir>/<driver>-reg.sock`, writes CDI specs under `--cdi-dir`, and runs until
SIGINT/SIGTERM. Exits 2 for bad flags or a runtime that does not answer.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
from pathlib import Path

from runtimekit.api import kubelet_dra
from runtimekit.api.runtime_client import FeatureUnavailable, RuntimeCallError, RuntimeClient
from runtimekit.cli.signals import wait_for_stop_signal
from runtimekit.cli.socketflags import socket_path
from runtimekit.draplugin.cdi import CdiWriter
from runtimekit.draplugin.checkpoint import Checkpoint
from runtimekit.draplugin.manager import Devices, DraPluginManager
from runtimekit.draplugin.names import dra_names
from runtimekit.draplugin.publisher import SlicePublisher
from runtimekit.draplugin.server import PluginServer
from runtimekit.draplugin.service import DraService
from runtimekit.kube.errors import KubeError
from runtimekit.protocol import ProtocolError, load_protocol

log = logging.getLogger("runtimekit.draplugin")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runtime-socket", type=socket_path, help="the runtime's socket (default: sockets.runtime of the protocol)"
    )
    parser.add_argument("--plugin-dir", default=kubelet_dra.PLUGINS_DIR, help="kubelet's plugins folder")
    parser.add_argument("--registry-dir", default=kubelet_dra.PLUGINS_REGISTRY, help="kubelet's plugin registry")
    parser.add_argument("--cdi-dir", default=kubelet_dra.CDI_DIR, help="where the container runtime reads CDI specs")
    parser.add_argument(
        "--state-dir", default="", help="where the prepared-claims checkpoint lives (default: <plugin-dir>/<driver>)"
    )
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME") or socket.gethostname())
    parser.add_argument("--kubeconfig", help="a kubeconfig file or an API server URL (default: in-cluster)")
    parser.add_argument("--protocol", help="protocol.yaml (default: built-in defaults)")
    parser.add_argument("--startup-timeout", type=float, default=60.0, help="seconds to wait for the runtime")
    parser.add_argument(
        "--no-device-classes", action="store_true", help="do not create the driver's DeviceClasses when missing"
    )


def run(args: argparse.Namespace) -> int:
    try:
        protocol = load_protocol(args.protocol)
    except ProtocolError as exc:
        log.error("%s", exc)
        return 2
    names = dra_names(protocol)
    from runtimekit.kube.draapi import KubeDraApi
    from runtimekit.kube.http import KubeConfigError

    try:
        kube = KubeDraApi.connect(args.kubeconfig)
    except KubeConfigError as exc:
        log.error("%s", exc)
        return 2
    if not args.no_device_classes:
        for device_class in names.device_classes():
            try:
                if kube.ensure_device_class(device_class):
                    log.info("created DeviceClass %s", device_class["metadata"].get("name"))
            except KubeError as exc:
                log.warning("%s (the plugin runs on; an admin may create it)", exc)
    client = RuntimeClient(args.runtime_socket or protocol.sockets.runtime)
    state_dir = Path(args.state_dir) if args.state_dir else Path(args.plugin_dir) / names.driver
    try:
        if not client.wait_ready(args.startup_timeout):
            log.error("the runtime at %s did not answer within %g s", client.socket_path, args.startup_timeout)
            return 2
        client.require("devices", "watch-devices", "allocate")
        devices = Devices()
        service = DraService(
            names.driver,
            args.node_name,
            client,
            kube,
            devices,
            CdiWriter(Path(args.cdi_dir), names.cdi_kind),
            Checkpoint(state_dir / "prepared-claims.json"),
        )
        server = PluginServer(service, Path(args.plugin_dir), Path(args.registry_dir), devices)
        publisher = SlicePublisher(kube, names.driver, args.node_name)
        manager = DraPluginManager(devices, client.watch_devices, server, publisher).start(args.startup_timeout)
    except (RuntimeCallError, FeatureUnavailable, TimeoutError, OSError, ValueError) as exc:
        log.error("cannot start the DRA plugin: %s", exc)
        client.close()
        kube.close()
        return 2
    log.info("DRA driver %s serving on %s", names.driver, server.endpoint)
    signum = wait_for_stop_signal()
    log.info("signal %d: stopping", signum)
    manager.stop()
    client.close()
    kube.close()
    return 0
