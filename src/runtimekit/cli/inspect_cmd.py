"""`runtimekit inspect` (and `kubectl lj inspect`): per node and per GPU, the shares granted, the pods
holding them, MIG instances, free room, health and, where the node's exporter answers, what is used
(docs/user-guide/inspect.md). Reads Nodes, Pods, DRA ResourceClaims and ResourceSlices through the
kit's API client (`kube.http`), any cluster and any preset (`--protocol hami`…); builds the view
(`inspect_view`, with the claims' shares from `inspect_claims`), scrapes the exporters (`inspect_usage`)
and prints it (`inspect_render`). Exits 0, or 2 with the reason on stderr when the cluster or the
options cannot be used.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from runtimekit.cli.inspect_view import PodShare
    from runtimekit.kube.http import KubeHttp
    from runtimekit.kube.objects import Pod
    from runtimekit.protocol import KitProtocol


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    parser.add_argument("--node", help="only this node")
    parser.add_argument("-o", "--output", choices=("table", "wide", "json"), default="table", help="output format")
    parser.add_argument(
        "--protocol",
        help="protocol.yaml, or a preset's name: hami, gpushare, volcano-vgpu or nvidia (default: built-in names)",
    )
    parser.add_argument(
        "--assignment-keys",
        help="folder of the Secret lj-runtimekit-assignment-key: assignments are then counted only when the "
        "scheduler's signature verifies, as the scheduler and the device plugin count them",
    )
    parser.add_argument(
        "--exporter",
        action="append",
        default=[],
        metavar="NODE=URL",
        help="the /metrics URL of a node's exporter (repeatable; default: the kit's exporter pods, found by label)",
    )
    parser.add_argument("--cluster-json", help="runtimekit up's cluster.json: its nodes' exporters")
    parser.add_argument("--no-usage", action="store_true", help="show granted shares only; scrape no exporter")


def run(args: argparse.Namespace) -> int:
    from runtimekit.base.keyring import KeyRing, KeyRingError
    from runtimekit.cli.inspect_json import view_json
    from runtimekit.cli.inspect_render import render
    from runtimekit.cli.inspect_usage import NodeUsage, discovered_exporters, scrape
    from runtimekit.cli.inspect_view import build_view
    from runtimekit.kube.errors import KubeError
    from runtimekit.kube.http import KubeConfigError, KubeHttp
    from runtimekit.kube.objects import Node, Pod
    from runtimekit.protocol import ProtocolError

    try:
        protocol = _protocol(args.protocol)
        keys = KeyRing.from_folder(Path(args.assignment_keys)) if args.assignment_keys else None
        given = _exporters(args.exporter, args.cluster_json)
        http = KubeHttp.connect(args.kubeconfig, user_agent="runtimekit-inspect")
    except (ProtocolError, KeyRingError, KubeConfigError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        nodes = cast(list[Node], http.list("/api/v1/nodes")[0])
        pods = cast(list[Pod], http.list("/api/v1/pods")[0])
        claimed = _claimed(http, pods)
    except KubeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        http.close()
    view = build_view(nodes, pods, protocol, keys, args.node, claimed)
    usage: dict[str, NodeUsage] = {}
    if not args.no_usage:
        urls = {**discovered_exporters(pods), **given}
        wanted = {n.name: urls[n.name] for n in view.nodes if n.name in urls}
        with ThreadPoolExecutor(max_workers=min(16, len(wanted) or 1)) as pool:
            usage = dict(zip(wanted, pool.map(scrape, wanted.values()), strict=True))
    if args.output == "json":
        json.dump(view_json(view, usage), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render(view, usage, sys.stdout, wide=args.output == "wide")
    return 0


def _claimed(http: KubeHttp, pods: list[Pod]) -> dict[str, list[PodShare]]:
    """The GPU shares DRA claims hold; none where the server has no resource.k8s.io/v1 (before 1.34) or
    the user may not list it."""
    from runtimekit.cli.inspect_claims import claim_shares
    from runtimekit.kube.errors import KubeError
    from runtimekit.kube.objects.dra import ResourceClaim, ResourceSlice

    try:
        claims = cast(list[ResourceClaim], http.list("/apis/resource.k8s.io/v1/resourceclaims")[0])
        slices = cast(list[ResourceSlice], http.list("/apis/resource.k8s.io/v1/resourceslices")[0])
    except KubeError as exc:
        if exc.code not in (403, 404):
            raise
        return {}
    return claim_shares(claims, slices, pods)


def _protocol(value: str | None) -> KitProtocol:
    from runtimekit.protocol import load_protocol
    from runtimekit.protocol.presets import PRESETS, preset_protocol

    if value and value in PRESETS and not Path(value).exists():
        return preset_protocol(value)
    return load_protocol(value)


def _exporters(pairs: list[str], cluster_json: str | None) -> dict[str, str]:
    """Node -> exporter URL from `--cluster-json` then `--exporter NODE=URL` (the later wins)."""
    found: dict[str, str] = {}
    if cluster_json:
        record = json.loads(Path(cluster_json).read_text(encoding="utf-8"))
        found |= {str(n["name"]): str(n["exporter"]) for n in record.get("nodes", []) if n.get("exporter")}
    for pair in pairs:
        node, sep, url = pair.partition("=")
        if not sep or not node or not url:
            raise ValueError(f"--exporter {pair!r}: give NODE=URL")
        found[node] = url
    return found
