"""The `runtimekit` command: one subcommand per component. Subcommand modules are imported only
when used, so `runtimekit protocol show` does not pay for gRPC or numpy."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from types import ModuleType

from runtimekit import __version__
from runtimekit.api.runtime_features import API_LEVEL
from runtimekit.protocol.loader import PROTOCOL_VERSION

# name -> (module, one-line help). Each module defines add_arguments(parser) and run(args) -> int, and
# may define parse_args(parser, argv) -> Namespace when its command line needs more than argparse.
COMMANDS: dict[str, tuple[str, str]] = {
    "protocol": ("runtimekit.cli.protocol_cmd", "show or compare protocol.yaml files"),
    "simulate": ("runtimekit.cli.simulate", "replay a cluster trace through the scheduler"),
    "scheduler": ("runtimekit.cli.scheduler", "run the GPU-sharing scheduler against a cluster"),
    "extender": ("runtimekit.cli.extender", "the GPU-sharing scheduler as a kube-scheduler HTTP extender"),
    "exporter": ("runtimekit.cli.exporter", "Prometheus metrics and GPU health detection for one node"),
    "controller": ("runtimekit.cli.controller", "switch nodes' runtimes on or off from a node label, via Jobs"),
    "job-agent": ("runtimekit.cli.job_agent", "enable or disable this node's runtime (run by controller Jobs)"),
    "demo": ("runtimekit.cli.demo", "the quick-start demo on the embedded default"),
    "runtime": ("runtimekit.cli.runtime", "the node runtime daemon (GPUs, allocation, isolation, gRPC API)"),
    "runtime-admin": ("runtimekit.cli.runtime_admin", "query a runtime, switch it, inject faults (simulated)"),
    "device-plugin": ("runtimekit.cli.device_plugin", "the kubelet device plugin (forwards Allocate to the runtime)"),
    "dra-plugin": (
        "runtimekit.cli.dra_plugin",
        "the DRA kubelet plugin: ResourceSlices, claims prepared by the runtime",
    ),
    "apiserver": ("runtimekit.cli.apiserver", "run the embedded Kubernetes API server alone"),
    "up": ("runtimekit.cli.up", "a whole GPU cluster on this machine: API server, simulated nodes, components"),
    "inspect": ("runtimekit.cli.inspect_cmd", "per GPU: shares granted, pods, MIG, free room, health, usage"),
    "webhook": ("runtimekit.cli.webhook", "admission webhook: GPU pods' scheduler and defaults, impossible requests"),
}


def version_text() -> str:
    """What `runtimekit --version` prints: the kit's version, the runtime gRPC API level it speaks
    (docs/runtime-api.md) and the protocol version it reads (docs/protocol.md), one per line."""
    return f"runtimekit {__version__}\nruntime API level {API_LEVEL}\nprotocol version {PROTOCOL_VERSION}\n"


class _VersionAction(argparse.Action):
    """argparse's own version action re-wraps its text into one paragraph; this prints it as it is."""

    def __init__(self, option_strings: Sequence[str], dest: str, **_kwargs: object) -> None:
        help_text = "print the version, the runtime API level and the protocol version"
        super().__init__(option_strings, dest, nargs=0, help=help_text)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        sys.stdout.write(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="runtimekit", description="LJ RuntimeKit: GPU sharing for Kubernetes")
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def parse_command(module: ModuleType, command: str, argv: Sequence[str]) -> argparse.Namespace:
    """A subcommand's arguments, parsed by its own `parse_args` where it has one."""
    sub = argparse.ArgumentParser(prog=f"runtimekit {command}", description=COMMANDS[command][1])
    module.add_arguments(sub)
    parse = getattr(module, "parse_args", None)
    if parse is not None:
        args: argparse.Namespace = parse(sub, list(argv))
        return args
    return sub.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    top, rest = parser.parse_known_args(args_list)
    if top.command is None:
        parser.print_help()
        return 2
    module = importlib.import_module(COMMANDS[top.command][0])
    args = parse_command(module, str(top.command), rest)
    logging.basicConfig(
        level=getattr(logging, str(top.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        code: int = module.run(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
