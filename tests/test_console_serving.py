"""`--console`: the web console's files on the HTTP port, as built and committed, and fresh.

The console itself is driven in Chromium by clients/typescript/test/console.test.ts; here: what the
server sends (the files, their types, a Content-Security-Policy that keeps the page to its own origin),
what it refuses, and that `server/console/console.js` is what `node console/build.mjs` builds from
console/src now (the page and its style sheet are written in server/console/ by hand).
"""

from __future__ import annotations

import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, ServeProcess, free_port

from server.config import ConfigError, ServerConfig
from server.http import CONSOLE


def _get(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def test_the_console_is_served_with_its_types_and_a_strict_policy(
    serve_process: Callable[..., ServeProcess],
) -> None:
    port = free_port()
    serve_process("--http-port", str(port), "--console")
    base = f"http://127.0.0.1:{port}"
    status, headers, body = _get(base + "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b"<title>Threadline console</title>" in body
    policy = headers["content-security-policy"]
    assert "script-src 'self'" in policy and "connect-src 'self'" in policy and "default-src 'none'" in policy
    assert headers["x-content-type-options"] == "nosniff"
    for path, kind in (("/console.js", "text/javascript"), ("/console.css", "text/css")):
        status, headers, body = _get(base + path)
        assert status == 200 and headers["content-type"].startswith(kind) and body
        assert body == (CONSOLE / path.lstrip("/")).read_bytes()
    status, _headers, body = _get(base + "/", method="HEAD")
    assert status == 200 and body == b""
    assert _get(base + "/other.js")[0] == 404
    assert _get(base + "/../server/app.py")[0] == 404


def test_without_console_the_port_serves_no_page(serve_process: Callable[..., ServeProcess]) -> None:
    port = free_port()
    serve_process("--http-port", str(port))
    assert _get(f"http://127.0.0.1:{port}/")[0] == 404


def test_the_console_needs_the_http_port() -> None:
    with pytest.raises(ConfigError, match="--console needs --http-port"):
        ServerConfig(console=True).check()


def test_the_committed_console_is_what_its_sources_build(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None, "node is needed (scripts/setup.sh)"
    built = tmp_path / "console"
    done = subprocess.run(
        [node, "console/build.mjs", "--out", str(built)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    built_script = (built / "console.js").read_bytes()
    assert built_script == (CONSOLE / "console.js").read_bytes(), (
        "server/console/console.js is stale: run `node console/build.mjs` and commit it"
    )
