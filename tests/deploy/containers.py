"""A rendered container as the kit would start it: its args parsed by the real `runtimekit` CLI parsers
(exactly as `runtimekit.cli.main.main` does, without running anything), with the files of its
ConfigMap written to a folder that stands in for the /etc/lj-runtimekit mount, and a fresh assignment key
in `<folder>/assignment-key` standing in for the mounted Secret."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from runtimekit.base.keyring import ensure_key_folder
from runtimekit.cli.main import COMMANDS, build_parser, parse_command

CONFIG_DIR = "/etc/lj-runtimekit"
KEY_DIR = "/var/run/secrets/lj-runtimekit/assignment-key"


def parse_args(args: Sequence[str]) -> tuple[str, argparse.Namespace]:
    """(command, namespace) for a container's args; raises SystemExit on a flag the CLI rejects."""
    top, rest = build_parser().parse_known_args(list(args))
    if top.command is None:
        raise SystemExit(f"no command in {list(args)}")
    module = importlib.import_module(COMMANDS[top.command][0])
    return str(top.command), parse_command(module, str(top.command), rest)


def materialise(
    args: Sequence[str], data: Mapping[str, str], folder: Path, mounts: Mapping[str, Mapping[str, str]] | None = None
) -> list[str]:
    """Write the ConfigMap's files into `folder` and point the args at them instead of the mount; the
    files of other ConfigMap mounts (`mounts`: mount path -> files) go to folders of their own, and the
    assignment key Secret to `<folder>/assignment-key` (a fresh key)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in data.items():
        (folder / name).write_text(text)
    keys = ensure_key_folder(folder / "assignment-key")
    out = [arg.replace(f"{CONFIG_DIR}/", f"{folder}/").replace(KEY_DIR, str(keys)) for arg in args]
    for i, (path, files) in enumerate(sorted((mounts or {}).items())):
        here = folder.parent / f"{folder.name}-mount{i}"
        here.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (here / name).write_text(text)
        out = [arg.replace(path, str(here)) for arg in out]
    return out
