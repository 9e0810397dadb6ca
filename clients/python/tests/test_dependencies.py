"""The SDK runs on what it declares: grpclib and betterproto2, never grpcio.

The generated module once carried a grpcio sync stub and imported `grpc`, so every host paid for
grpcio. A subprocess with `grpc` made unimportable proves the SDK imports and calls a real server
without it, even in this venv where the server's grpcio is installed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import threadline_client

SDK = Path(__file__).resolve().parents[1]

WITHOUT_GRPCIO = textwrap.dedent(
    """
    import asyncio, importlib.abc, os, sys

    class NoGrpcio(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "grpc" or name.startswith("grpc."):
                raise ImportError(f"grpcio is not installed for this host ({name})")
            return None

    sys.meta_path.insert(0, NoGrpcio())
    import threadline_client as tl

    async def main():
        async with tl.Client(os.environ["ADDR"], token=os.environ.get("TOKEN") or None) as client:
            info = await client.get_server_info()
            result = await client.run(tl.v1.RunSpec(text="hello"))
        assert info.schema_versions and result.status is tl.v1.RunStatus.COMPLETED, (info, result)
        loaded = sorted(name for name in sys.modules if name == "grpc" or name.startswith("grpc."))
        assert not loaded, loaded
        print("ok without grpcio")

    asyncio.run(main())
    """
)


def test_the_sdk_imports_and_runs_without_grpcio(server_addr: str, server_token: str | None) -> None:
    env = {**os.environ, "ADDR": server_addr, "TOKEN": server_token or ""}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_GRPCIO], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok without grpcio"


def test_grpcio_is_no_dependency() -> None:
    declared = tomllib.loads((SDK / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[\[<>=!~;\s]", spec, maxsplit=1)[0].lower() for spec in declared}
    assert "grpcio" not in names
    assert {"betterproto2", "grpclib", "googleapis-common-protos"} <= names


def test_only_the_async_stub_is_generated() -> None:
    assert "HarnessServiceStub" in threadline_client.v1.__all__
    assert "HarnessServiceSyncStub" not in threadline_client.v1.__all__
