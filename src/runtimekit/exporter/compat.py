"""Which peers' metric names the exporter writes besides its own (`metricsCompat`, `--metrics-compat`),
and their families from a scrape's sample: dcgm-exporter's (`compat_dcgm`) and HAMi's (`compat_hami`).
Called by `build_registry` (the modes) and `RuntimeCollector` (the families).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import Metric

from runtimekit.exporter.compat_dcgm import dcgm_families
from runtimekit.exporter.compat_hami import hami_families
from runtimekit.exporter.config import COMPAT_MODES, PRESET
from runtimekit.exporter.sample import Sample
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import metrics_compat


def parse_modes(text: str) -> tuple[str, ...]:
    """`--metrics-compat`: `dcgm`, `hami`, `dcgm,hami`, `preset` or `none`; ValueError names a bad one."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["none"]:
        return ()
    unknown = [n for n in names if n not in (*COMPAT_MODES, PRESET)]
    if unknown or not names:
        raise ValueError(f"--metrics-compat {text!r}: expected {', '.join(COMPAT_MODES)}, {PRESET} or none")
    return tuple(names)


def resolve_modes(requested: Sequence[str], protocol: KitProtocol) -> tuple[str, ...]:
    """The modes to write: `preset` becomes what the protocol's preset implies; each mode once."""
    modes: list[str] = []
    for mode in requested:
        for m in metrics_compat(protocol) if mode == PRESET else (mode,):
            if m not in modes:
                modes.append(m)
    return tuple(modes)


def compat_families(sample: Sample, modes: Sequence[str]) -> Iterator[Metric]:
    for mode in modes:
        yield from dcgm_families(sample) if mode == "dcgm" else hami_families(sample)
