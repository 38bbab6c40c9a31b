"""`runtimekit protocol show [FILE]`, `runtimekit protocol check FILE...` and
`runtimekit protocol preset NAME [--output FILE]` (a peer system's names: runtimekit.protocol.presets)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runtimekit.protocol import ProtocolError, compare_protocols, load_protocol, load_protocol_sources
from runtimekit.protocol.presets import PRESETS, preset_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = sub.add_parser("show", help="print the effective protocol (defaults merged with FILE)")
    show.add_argument("file", nargs="?", help="a protocol.yaml (default: the built-in defaults)")
    check = sub.add_parser("check", help="compare protocol files or ConfigMap manifests holding protocol.yaml")
    check.add_argument("files", nargs="+", help="protocol.yaml files and/or manifests with ConfigMaps")
    known = ", ".join(f"{name} ({p.system})" for name, p in PRESETS.items())
    preset = sub.add_parser(
        "preset", help=f"write the protocol.yaml under which another system's manifests run: {known}"
    )
    preset.add_argument("name", metavar="NAME", help=f"one of: {', '.join(PRESETS)}")
    preset.add_argument("-o", "--output", help="write to this file (default: standard output)")


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "preset":
            text = preset_text(args.name)
            if args.output:
                Path(args.output).write_text(text, encoding="utf-8")
            else:
                sys.stdout.write(text)
            return 0
        if args.action == "show":
            protocol = load_protocol(args.file)
            sys.stdout.write(protocol.to_yaml())
            sys.stdout.write(f"# fingerprint: {protocol.fingerprint}\n")
            return 0
        found = [item for path in args.files for item in load_protocol_sources(path)]
    except ProtocolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if len(found) < 2:
        print(f"error: need at least two protocols to compare, found {len(found)}", file=sys.stderr)
        return 2
    diffs = compare_protocols(found)
    for label, protocol in found:
        print(f"{protocol.fingerprint}  {label}")
    if not diffs:
        print(f"ok: {len(found)} protocols agree")
        return 0
    for diff in diffs:
        values = ", ".join(f"{label}={value!r}" for label, value in diff.values.items())
        print(f"differs: {diff.key}: {values}", file=sys.stderr)
    return 1
