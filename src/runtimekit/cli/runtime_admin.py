"""`runtimekit runtime-admin`: talk to a running runtime over its socket.

    runtimekit runtime-admin --socket PATH inject xid --gpu 0 --xid 79
    runtimekit runtime-admin --socket PATH inject ecc --gpu 0 [--uncorrectable] [--count N]
    runtimekit runtime-admin --socket PATH inject lost|back --gpu 0
    runtimekit runtime-admin --socket PATH version|devices|allocations|status|enable|disable [--reason R]
    runtimekit runtime-admin --socket PATH ready

Prints the answer as JSON. Exits 1 when the runtime refuses (the message says why), 2 when it
cannot be reached or lacks the feature. `ready` (the runtime DaemonSet's readiness probe) prints the
checkpoint state and exits 0 only when the runtime's allocations cover the node's running
containers (ok or recovered), 1 otherwise (unverified, incomplete, unrecovered).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from runtimekit.api.runtime_client import FeatureUnavailable, RuntimeCallError, RuntimeClient
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.cli.socketflags import socket_path
from runtimekit.protocol import KitProtocol

FAULTS = {
    "xid": pb.FAULT_KIND_XID,
    "ecc": pb.FAULT_KIND_ECC,
    "lost": pb.FAULT_KIND_GPU_LOST,
    "back": pb.FAULT_KIND_GPU_BACK,
}
UNREACHABLE = {"UNAVAILABLE", "DEADLINE_EXCEEDED"}
TRUSTED = {pb.CHECKPOINT_STATE_OK, pb.CHECKPOINT_STATE_RECOVERED}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--socket", type=socket_path, default=KitProtocol.default().sockets.runtime, help="the runtime's unix socket"
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per call")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    inject = sub.add_parser("inject", help="inject a fault (simulated backend only)")
    inject.add_argument("fault", choices=sorted(FAULTS))
    inject.add_argument("--gpu", type=int, required=True, help="GPU index")
    inject.add_argument("--xid", type=int, default=0, help="XID number (inject xid)")
    inject.add_argument("--uncorrectable", action="store_true", help="an uncorrectable ECC error (inject ecc)")
    inject.add_argument("--count", type=int, default=1, help="ECC errors to add (inject ecc)")
    for name, text in (
        ("version", "runtime version, API level and features"),
        ("devices", "the node's GPUs and their health"),
        ("allocations", "the container allocations"),
        ("status", "the on/off switch, MPS daemon and checkpoint state"),
        ("ready", "exit 0 when the allocations cover the node's running containers (readiness probe)"),
    ):
        sub.add_parser(name, help=text)
    for name in ("enable", "disable"):
        switch = sub.add_parser(name, help=f"{name} new allocations on this node")
        switch.add_argument("--reason", default="", help="recorded with the change")


def _call(client: RuntimeClient, args: argparse.Namespace) -> Any:
    action = args.action
    if action == "inject":
        if args.fault == "xid" and args.xid <= 0:
            raise ValueError("inject xid needs --xid N (N > 0)")
        return client.inject_fault(FAULTS[args.fault], args.gpu, args.xid, args.uncorrectable, args.count)
    if action == "version":
        return client.version(refresh=True).__dict__ | {"features": sorted(client.version().features)}
    if action == "devices":
        return [_dict(d) for d in client.list_devices()]
    if action == "allocations":
        return [_dict(a) for a in client.list_allocations()]
    if action in ("status", "ready"):
        return client.status()
    if action == "enable":
        return client.enable(args.reason)
    return client.disable(args.reason)


def _dict(message: Message) -> dict[str, Any]:
    return MessageToDict(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def run(args: argparse.Namespace) -> int:
    with RuntimeClient(args.socket, timeout_s=args.timeout) as client:
        try:
            answer = _call(client, args)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except FeatureUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except RuntimeCallError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2 if exc.code.name in UNREACHABLE else 1
    if args.action == "ready":
        state = answer.checkpoint
        print(f"{pb.CheckpointState.Name(state)}: {answer.checkpoint_message}")
        return 0 if state in TRUSTED else 1
    if isinstance(answer, Message):
        answer = _dict(answer)
    print(json.dumps(answer, indent=2, sort_keys=True))
    return 0
