"""aiohttp helpers the HTTP handlers share: reading a body within kube-apiserver's size limit, writing a
long list in chunks, and the `dryRun` query parameter. Called by `handlers.py`.
"""

from __future__ import annotations

from aiohttp import web

from runtimekit.cluster.apiserver.bodies import MAX_BODY_BYTES, body_too_large
from runtimekit.cluster.apiserver.errors import bad_request

STREAM_ITEMS = 1000  # lists longer than this are streamed in chunks of this many items


async def stream_list(request: web.Request, parts: tuple[bytes, bytes], items: list[bytes]) -> web.StreamResponse:
    """A large list, written in chunks as it is joined (no second copy of the whole body)."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    await response.write(parts[0])
    for at in range(0, len(items), STREAM_ITEMS):
        chunk = b",".join(items[at : at + STREAM_ITEMS])
        await response.write(b"," + chunk if at else chunk)
    await response.write(parts[1])
    await response.write_eof()
    return response


async def read_body(request: web.Request) -> bytes:
    """The body, refused with kube-apiserver's 413 past its 3 MiB limit (before reading it all)."""
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise body_too_large()
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise body_too_large() from None


def dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    if any(v != "All" for v in values):
        raise bad_request(f"unsupported dryRun value(s) {values}: only All is supported")
    return bool(values)
