"""The gRPC error mapping, over a real gRPC server on a unix socket: a refusal keeps its code and
message, anything else is INTERNAL naming the component, and the server keeps serving."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from runtimekit.base.rpcerrors import Code, ServiceError, grpc_method


class Echo:
    """Answers its request, refuses `refuse`, breaks on `break`."""

    @grpc_method("echo service", log_refusals=True)
    def Say(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        if request == b"refuse":
            raise ServiceError(Code.RESOURCE_EXHAUSTED, "no room for that")
        if request == b"break":
            raise KeyError("gpu-7")
        return request


@pytest.fixture
def call(tmp_path: Path) -> Iterator[Any]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    echo = Echo()
    handler = grpc.method_handlers_generic_handler("test.Echo", {"Say": grpc.unary_unary_rpc_method_handler(echo.Say)})
    server.add_generic_rpc_handlers((handler,))
    target = f"unix://{tmp_path / 'echo.sock'}"
    server.add_insecure_port(target)
    server.start()
    channel = grpc.insecure_channel(target)
    yield channel.unary_unary("/test.Echo/Say")
    channel.close()
    server.stop(0).wait()


@pytest.mark.parametrize(
    ("request_body", "code", "details"),
    [
        pytest.param(b"refuse", grpc.StatusCode.RESOURCE_EXHAUSTED, "no room for that", id="refusal"),
        pytest.param(b"break", grpc.StatusCode.INTERNAL, "echo service Say: KeyError: 'gpu-7'", id="bug"),
    ],
)
def test_errors_become_statuses_and_the_server_keeps_serving(
    call: Any, request_body: bytes, code: grpc.StatusCode, details: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(grpc.RpcError) as failed:
        call(request_body, timeout=10)
    assert failed.value.code() is code
    assert failed.value.details() == details
    assert call(b"still here", timeout=10) == b"still here"
    assert "echo service Say" in caplog.text


def test_every_code_is_a_grpc_status() -> None:
    assert {ServiceError(c, "").status.name for c in Code} == {c.value for c in Code}
