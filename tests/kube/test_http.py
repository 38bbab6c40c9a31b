"""KubeHttp's JSON and watch-stream handling that the server tests do not reach: watch lines split
over chunks at any byte, and the codec's errors."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtimekit.kube import jsoncodec
from runtimekit.kube.http import _lines

EVENTS = [b'{"type":"ADDED","object":{"metadata":{"name":"p\\u00e9"}}}', b'{"type":"BOOKMARK","object":{}}']


@given(st.lists(st.integers(0, 120), max_size=6), st.booleans(), st.booleans())
def test_watch_lines_whatever_the_chunking(cuts: list[int], blank_lines: bool, final_newline: bool) -> None:
    stream = (b"\n\n" if blank_lines else b"\n").join(EVENTS) + (b"\n" if final_newline else b"")
    bounds = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    chunks = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    assert list(_lines(chunks)) == EVENTS
    assert [jsoncodec.loads(line)["type"] for line in _lines(chunks)] == ["ADDED", "BOOKMARK"]


def test_codec_is_compact_and_refuses_bad_json_with_value_error() -> None:
    assert jsoncodec.dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    assert jsoncodec.loads(b'{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    with pytest.raises(ValueError, match="truncated"):
        jsoncodec.loads(b'{"a": ')
