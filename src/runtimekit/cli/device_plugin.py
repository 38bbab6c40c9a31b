"""`runtimekit device-plugin`: the kubelet device plugin, forwarding Allocate to the node runtime.

Registers `resources.gpu`, `resources.core`, `resources.memory` (and a resource per MIG profile)
with kubelet through `<plugin-dir>/kubelet.sock`, publishes the node's GPU inventory, and runs until
SIGINT/SIGTERM. `--memory-unit` sets the size of one `resources.memory` device on this node (default:
the protocol's memoryUnit); the plugin publishes it in the node label `labels.memoryUnit`, where the
scheduler reads it, so nodes may use different units. Exits 2 for bad flags or a runtime that does
not answer.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
from pathlib import Path

from runtimekit.api import kubelet
from runtimekit.api.runtime_client import FeatureUnavailable, RuntimeCallError, RuntimeClient
from runtimekit.cli.signals import wait_for_stop_signal
from runtimekit.deviceplugin.manager import DevicePluginManager
from runtimekit.deviceplugin.publisher import NodePublisher
from runtimekit.deviceplugin.service import DevicePluginService, DeviceState, PluginSettings
from runtimekit.protocol import Protocol, ProtocolError, load_protocol
from runtimekit.protocol.names import format_memory_unit, memory_unit_mib

log = logging.getLogger("runtimekit.deviceplugin")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runtime-socket", help="the runtime's socket (default: sockets.runtime of the protocol)")
    parser.add_argument("--plugin-dir", default=kubelet.DEVICE_PLUGIN_PATH, help="kubelet's device plugin folder")
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME") or socket.gethostname())
    parser.add_argument("--kubeconfig", help="a kubeconfig file or an API server URL (default: in-cluster)")
    parser.add_argument(
        "--memory-unit", help="size of one gpu-memory device on this node, e.g. 512Mi (default: protocol's memoryUnit)"
    )
    parser.add_argument("--protocol", help="protocol.yaml (default: built-in defaults)")
    parser.add_argument("--startup-timeout", type=float, default=60.0, help="seconds to wait for the runtime")


def memory_unit(protocol: Protocol, flag: str | None) -> int:
    """MiB per gpu-memory device on this node: `--memory-unit`, else the protocol's memoryUnit.
    Raises ValueError (naming the flag) for a value that is not a whole number of MiB."""
    if flag is None:
        return protocol.memory_unit_mib
    try:
        return memory_unit_mib(flag)
    except ValueError as exc:
        raise ValueError(f"--memory-unit: {exc}") from None


def run(args: argparse.Namespace) -> int:
    try:
        protocol = load_protocol(args.protocol)
    except ProtocolError as exc:
        log.error("%s", exc)
        return 2
    try:
        unit = memory_unit(protocol, args.memory_unit)
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    log.info("protocol %s (fingerprint %s)", args.protocol or "<defaults>", protocol.fingerprint)
    log.info("gpu-memory unit on this node: %s", format_memory_unit(unit))
    from runtimekit.kube.http import KubeConfigError
    from runtimekit.kube.nodeapi import KubeNodeApi

    try:
        kube = KubeNodeApi.connect(args.kubeconfig)
    except KubeConfigError as exc:
        log.error("%s", exc)
        return 2
    client = RuntimeClient(args.runtime_socket or protocol.sockets.runtime)
    try:
        if not client.wait_ready(args.startup_timeout):
            log.error("the runtime at %s did not answer within %g s", client.socket_path, args.startup_timeout)
            return 2
        version = client.require("devices", "watch-devices", "allocate")
        if version.protocol_fingerprint != protocol.fingerprint:
            log.warning(
                "protocol mismatch: the runtime runs %s, this plugin %s",
                version.protocol_fingerprint,
                protocol.fingerprint,
            )
        pods = kube.node_pods(args.node_name).start()
        settings = PluginSettings(args.node_name, protocol, unit)
        service = DevicePluginService(settings, client, kube, DeviceState(), pods)
        publisher = NodePublisher(kube, args.node_name, protocol, unit)
        manager = DevicePluginManager(service, client.watch_devices, Path(args.plugin_dir), publisher).start(
            first_devices_timeout_s=args.startup_timeout
        )
    except (RuntimeCallError, FeatureUnavailable, TimeoutError, OSError) as exc:
        log.error("cannot start the device plugin: %s", exc)
        client.close()
        return 2
    signum = wait_for_stop_signal()
    log.info("signal %d: stopping", signum)
    manager.stop()
    pods.stop()
    client.close()
    return 0
