"""Score normalisation and image locality with kube-scheduler's arithmetic (integer scores 0-100).

- `default_normalize`: `helper.DefaultNormalizeScore`: score x 100 / max (integer division), 0 for
  all when the max is 0; reversed (100 - that, and 100 for all when the max is 0) for scores where
  fewer is better (PreferNoSchedule taints). Used by NodeAffinity and TaintToleration.
- Image locality: a node scores by the sizes of the pod's images it already has, each scaled by the
  share of nodes that have it (so a popular image does not pull every pod to the same nodes),
  summed over the pod's containers and clamped between 23 MiB and 1000 MiB per container.

Pure; callers: the nodeorder plugin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

MAX_SCORE = 100
MIB = 1024 * 1024
MIN_THRESHOLD = 23 * MIB
MAX_CONTAINER_THRESHOLD = 1000 * MIB

Floats = npt.NDArray[np.float64]


def default_normalize(raw: Floats, reverse: bool = False) -> Floats:
    """Scores of 0..max mapped to 0..100 in integers (reversed: 100..0)."""
    if raw.size == 0:
        return np.zeros(0)
    high = int(raw.max(initial=0))
    if high <= 0:
        return np.full(raw.size, float(MAX_SCORE if reverse else 0))
    scaled = (MAX_SCORE * raw.astype(np.int64)) // high
    return (MAX_SCORE - scaled if reverse else scaled).astype(np.float64)


def image_priority(summed: int, containers: int) -> int:
    """The 0-100 score of a node whose images of the pod add up to `summed` (scaled) bytes."""
    high = MAX_CONTAINER_THRESHOLD * containers
    summed = min(max(summed, MIN_THRESHOLD), high)
    if high <= MIN_THRESHOLD:
        return 0
    return MAX_SCORE * (summed - MIN_THRESHOLD) // (high - MIN_THRESHOLD)


def image_score(
    images: Sequence[str],
    containers: int,
    node_images: Mapping[str, int],
    spread: Mapping[str, int],
    total_nodes: int,
) -> int:
    """A node's image locality score: `node_images` maps the node's image names to sizes, `spread`
    each image name to the number of nodes that have it."""
    summed = 0
    for image in images:
        size = node_images.get(image)
        if size is not None and total_nodes:
            summed += int(float(size) * (spread.get(image, 0) / total_nodes))
    return image_priority(summed, containers)
