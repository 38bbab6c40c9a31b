"""Naming rules of the protocol's values: a memory unit written back as a quantity (the device
plugin's node label) reads as the same number of MiB and is a valid label value."""

from __future__ import annotations

import re

import pytest

from runtimekit.protocol.names import format_memory_unit, memory_unit_mib


@pytest.mark.parametrize("mib", [1, 256, 512, 1000, 1024, 1536, 2048, 40960])
def test_a_formatted_memory_unit_reads_back_as_itself_and_is_a_label_value(mib: int) -> None:
    text = format_memory_unit(mib)
    assert memory_unit_mib(text) == mib
    assert re.fullmatch(r"[0-9]+(Mi|Gi)", text)
    assert len(text) <= 63


@pytest.mark.parametrize(("mib", "text"), [(1024, "1Gi"), (512, "512Mi"), (1536, "1536Mi"), (2048, "2Gi")])
def test_a_memory_unit_is_written_in_its_shortest_form(mib: int, text: str) -> None:
    assert format_memory_unit(mib) == text
