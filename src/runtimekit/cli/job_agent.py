"""`runtimekit job-agent --action enable|disable`: switch this node's runtime (run by controller Jobs)."""

from __future__ import annotations

import argparse
import sys

from runtimekit.cli.socketflags import socket_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--action", required=True, choices=["enable", "disable"])
    parser.add_argument(
        "--socket", type=socket_path, help="the runtime's socket (default: the protocol's sockets.runtime)"
    )
    parser.add_argument("--protocol", help="protocol.yaml (default: built-in names)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the state to settle")
    parser.add_argument("--reason", default="", help="recorded with the switch")
    parser.add_argument("--termination-log", default="/dev/termination-log")


def run(args: argparse.Namespace) -> int:
    from runtimekit.controller.agent import AgentError, switch, write_termination_message
    from runtimekit.protocol import ProtocolError, load_protocol

    try:
        socket = args.socket or load_protocol(args.protocol).sockets.runtime
        result = switch(socket, args.action, args.timeout, args.reason)
    except (AgentError, ProtocolError) as exc:
        message = f"job-agent: {args.action} failed: {exc}"
        print(message, file=sys.stderr)
        write_termination_message(message, args.termination_log)
        return 1
    print(f"job-agent: {result.message}")
    write_termination_message(result.message, args.termination_log)
    return 0
