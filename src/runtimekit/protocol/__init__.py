"""The names every component must agree on, loaded from one `protocol.yaml`.

`load_protocol` is the only loader; every component calls it once at start-up and logs
`KitProtocol.fingerprint` so that a mismatch between components is detected, not discovered.
"""

from runtimekit.protocol.loader import (
    DEFAULTS,
    PROTOCOL_VERSION,
    KitProtocol,
    ProtocolError,
    compare_protocols,
    load_protocol,
    load_protocol_sources,
    parse_protocol_text,
)

__all__ = [
    "DEFAULTS",
    "PROTOCOL_VERSION",
    "KitProtocol",
    "ProtocolError",
    "compare_protocols",
    "load_protocol",
    "load_protocol_sources",
    "parse_protocol_text",
]
