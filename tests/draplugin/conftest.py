"""Fixtures for the DRA plugin: a simulated runtime on a socket and the plugin's service over claims in memory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from dra_helpers import DraStack, make_stack


@pytest.fixture
def dra_stack() -> Iterator[Callable[..., DraStack]]:
    stacks: list[DraStack] = []

    def factory(**kwargs: Any) -> DraStack:
        stack = make_stack(**kwargs)
        stacks.append(stack)
        return stack

    yield factory
    for stack in stacks:
        stack.close()
