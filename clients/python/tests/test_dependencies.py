"""The SDK runs on what it declares: grpclib and betterproto2, never grpcio.

The generated module once carried a grpcio sync stub and imported `grpc`, so every host paid for
grpcio. A subprocess with `grpc` made unimportable proves the SDK imports and calls a real server
without it, even in this venv where the server's grpcio is installed.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import threadline_client

SDK = Path(__file__).resolve().parents[1]


def test_the_sdk_imports_and_runs_without_grpcio(host_without: Callable[..., None]) -> None:
    body = """
info = await client.get_server_info()
result = await client.run(tl.v1.RunSpec(text="hello"))
assert info.schema_versions and result.status is tl.v1.RunStatus.COMPLETED, (info, result)
"""
    host_without("grpc", body)


def test_grpcio_is_no_dependency() -> None:
    declared = tomllib.loads((SDK / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[\[<>=!~;\s]", spec, maxsplit=1)[0].lower() for spec in declared}
    assert "grpcio" not in names
    assert {"betterproto2", "grpclib", "googleapis-common-protos"} <= names


def test_only_the_async_stub_is_generated() -> None:
    assert "HarnessServiceStub" in threadline_client.v1.__all__
    assert "HarnessServiceSyncStub" not in threadline_client.v1.__all__
