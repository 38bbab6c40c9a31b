"""packfrag's decisions on a slice of openb stay what they were when its speed work began: every
16th node of the bundled GPU node list and the bundled default pod list, seed 42, tune 1.3 (about
760 arrivals over 76 nodes; the workload learned online, the share prices solved, relearns and
batches of every size on the way). A speed change must not move a pod: the order of the pods
placed and the columns must stay bit-identical. A change meant to move decisions updates them."""

from __future__ import annotations

import hashlib
import json

from runtimekit.model.trace import read_node_list, read_pod_list
from runtimekit.sim.arrivals import build_arrivals
from runtimekit.sim.replay import replay
from runtimekit.sim.runner import DEFAULT_NODES, DEFAULT_PODS, bundled

PLACED_SHA256 = "51f2b62618566c5f59bc2087ae04d154596ef4002db3f3bcc6a39c48cae87f63"
COLUMNS = {"50": 50.08, "90": 90.13, "100": 95.26, "130": 95.45}


def test_packfrag_places_the_openb_slice_as_before() -> None:
    nodes = read_node_list(bundled(DEFAULT_NODES))[::16]
    pods = read_pod_list(bundled(DEFAULT_PODS))
    result = replay(nodes, build_arrivals(pods, nodes, 42, 1.3), "packfrag", 42, None)
    assert (result.arrived_pods, result.failed_pods, result.total_gpus) == (762, 156, 414)
    assert {c: result.columns[c] for c in COLUMNS} == COLUMNS
    assert hashlib.sha256(json.dumps(result.placed).encode()).hexdigest() == PLACED_SHA256
