"""Bearer tokens and TLS, each against a server of its own started with the matching flags."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import threadline_client as tl

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token"
StartServer = Callable[..., str]  # the `start_server` fixture of conftest.py


@pytest.fixture(scope="module")
def token_server(start_server: StartServer) -> str:
    return start_server("--token", TOKEN)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def tls_server(start_server: StartServer, tls_files: tuple[Path, Path]) -> str:
    cert, key = tls_files
    return start_server("--tls-cert", str(cert), "--tls-key", str(key))


async def test_the_token_is_sent_on_every_call(token_server: str) -> None:
    async with tl.Client(token_server, token=TOKEN) as client:
        assert (await client.get_server_info()).default_agent == "default"
        result = await client.stream_run(tl.RunSpec(text="hello")).collect()
        assert result.status == tl.RunStatus.COMPLETED


@pytest.mark.parametrize(
    ("token", "reason"), [(None, "TOKEN_MISSING"), ("wrong", "TOKEN_INVALID")], ids=["missing", "wrong"]
)
async def test_a_missing_or_wrong_token_is_unauthenticated(
    token_server: str, token: str | None, reason: str
) -> None:
    async with tl.Client(token_server, token=token) as client:
        with pytest.raises(tl.ThreadlineError) as caught:
            await client.run(tl.RunSpec(text="hello"))
    assert caught.value.status == tl.StatusCode.UNAUTHENTICATED
    assert caught.value.reason == reason


async def test_tls_with_the_servers_certificate(tls_server: str, tls_files: tuple[Path, Path]) -> None:
    cert, _ = tls_files
    async with tl.Client(tls_server, tls=ssl.create_default_context(cafile=str(cert))) as client:
        result = await client.run(tl.RunSpec(text="hello"))
    assert tl.output(result) == "You said: hello"


async def test_plaintext_to_a_tls_server_fails(tls_server: str) -> None:
    async with tl.Client(tls_server, timeout=10.0) as client:
        with pytest.raises(tl.ThreadlineError) as caught:
            await client.get_server_info()
    assert caught.value.reason == ""
