"""`runtimekit device-plugin`: the kubelet device plugin, forwarding Allocate to the node runtime.

Registers `resources.gpu`, `resources.core`, `resources.memory` (and a resource per MIG profile)
with kubelet through `<plugin-dir>/kubelet.sock`, publishes the node's GPU inventory, and runs until
SIGINT/SIGTERM. `--memory-unit` sets the size of one `resources.memory` device on this node (default:
the protocol's memoryUnit); the plugin publishes it in the node label `labels.memoryUnit`, where the
scheduler reads it, so nodes may use different units. Exits 2 for bad flags, a runtime that does not
answer, or no usable assignment key (`--assignment-keys`: without it every pod's own assignment
would be taken).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
from pathlib import Path

from runtimekit.api import kubelet
from runtimekit.api.podresources_client import PodResourcesClient
from runtimekit.api.runtime_client import FeatureUnavailable, RuntimeCallError, RuntimeClient
from runtimekit.base.keyring import KeyRing, KeyRingError
from runtimekit.base.unixsockets import check_path
from runtimekit.cli.signals import wait_for_stop_signal
from runtimekit.cli.socketflags import socket_path
from runtimekit.deviceplugin.manager import DevicePluginManager
from runtimekit.deviceplugin.publisher import NodePublisher
from runtimekit.deviceplugin.service import DevicePluginService, DeviceState, PluginSettings
from runtimekit.protocol import KitProtocol, ProtocolError, load_protocol
from runtimekit.protocol.names import format_memory_unit, memory_unit_mib

log = logging.getLogger("runtimekit.deviceplugin")
KEYS_MOUNT = "/var/run/secrets/lj-runtimekit/assignment-key"  # where the kit's manifests mount the Secret


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runtime-socket", type=socket_path, help="the runtime's socket (default: sockets.runtime of the protocol)"
    )
    parser.add_argument("--plugin-dir", default=kubelet.DEVICE_PLUGIN_PATH, help="kubelet's device plugin folder")
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME") or socket.gethostname())
    parser.add_argument("--kubeconfig", help="a kubeconfig file or an API server URL (default: in-cluster)")
    parser.add_argument(
        "--memory-unit", help="size of one gpu-memory device on this node, e.g. 512Mi (default: protocol's memoryUnit)"
    )
    parser.add_argument("--protocol", help="protocol.yaml (default: built-in defaults)")
    parser.add_argument("--startup-timeout", type=float, default=60.0, help="seconds to wait for the runtime")
    parser.add_argument(
        "--assignment-keys",
        help="folder holding the keys the scheduler signs assignments with (`current`; `next` and `previous` "
        "while rotating, docs/security.md#rotation): the Secret lj-runtimekit-assignment-key (default: "
        f"{KEYS_MOUNT} when it exists); required",
    )
    parser.add_argument(
        "--pod-resources-socket",
        type=socket_path,
        default=kubelet.POD_RESOURCES_SOCKET,
        help="kubelet's PodResources socket, which tells which pod an Allocate is for ('' to match by age only, "
        "which two pods of one size can swap)",
    )


def memory_unit(protocol: KitProtocol, flag: str | None) -> int:
    """MiB per gpu-memory device on this node: `--memory-unit`, else the protocol's memoryUnit.
    Raises ValueError (naming the flag) for a value that is not a whole number of MiB."""
    if flag is None:
        return protocol.memory_unit_mib
    try:
        return memory_unit_mib(flag)
    except ValueError as exc:
        raise ValueError(f"--memory-unit: {exc}") from None


def load_keys(folder: str | None) -> KeyRing | None:
    """The key ring of `--assignment-keys` (else of the Secret's usual mount), or None after logging why
    there is none."""
    folder = folder or (KEYS_MOUNT if Path(KEYS_MOUNT).is_dir() else None)
    if not folder:
        log.error(
            "--assignment-keys is required: the folder of the Secret lj-runtimekit-assignment-key, which the "
            "scheduler signs assignments with; without it pods could choose their own GPUs (docs/security.md)"
        )
        return None
    try:
        keys = KeyRing.from_folder(folder)
    except KeyRingError as exc:
        log.error("--assignment-keys: %s", exc)
        return None
    log.info("assignment keys: %s", keys.keys.describe())
    return keys


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
    try:
        check_path(str(Path(args.plugin_dir) / kubelet.KUBELET_SOCKET_NAME), "--plugin-dir")
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
    keys = load_keys(args.assignment_keys)
    if keys is None:
        kube.close()
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
        pod_resources = PodResourcesClient(args.pod_resources_socket) if args.pod_resources_socket else None
        if pod_resources is None:
            log.warning("no PodResources socket: Allocate is matched to the oldest waiting pod of its size")
        settings = PluginSettings(args.node_name, protocol, unit, keys=keys)
        service = DevicePluginService(settings, client, kube, DeviceState(), pods, pod_resources)
        publisher = NodePublisher(kube, args.node_name, protocol, unit)
        manager = DevicePluginManager(service, client.watch_devices, Path(args.plugin_dir), publisher).start(
            first_devices_timeout_s=args.startup_timeout
        )
    except (RuntimeCallError, FeatureUnavailable, TimeoutError, OSError, ValueError) as exc:
        log.error("cannot start the device plugin: %s", exc)
        client.close()
        return 2
    signum = wait_for_stop_signal()
    log.info("signal %d: stopping", signum)
    manager.stop()
    pods.stop()
    if pod_resources is not None:
        pod_resources.close()
    client.close()
    return 0
