"""docs/http.md is executable: every `sh` block runs verbatim against a live `threadline serve` with
`--http-port`, in one scratch directory, with `$HTTP` pointing at the port (as tests/test_grpcurl_walkthrough.py
runs docs/grpcurl.md)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, ServeProcess, free_port
from walkthrough import doc_steps, run_step

DOC = REPO / "docs" / "http.md"


def test_the_doc_shows_curl_for_every_kind_of_call() -> None:
    codes = "\n".join(step.code for step in doc_steps(DOC))
    for needle in ("HarnessService/Run", "GetServerInfo", "CreateThread", "RunThread", "StreamRun"):
        assert needle in codes
    assert "Connect-Timeout-Ms" in codes and "Authorization: Bearer" in codes and "OPTIONS" in codes
    # The issue's own command, word for word.
    assert 'curl -s -H \'Content-Type: application/json\' -d \'{"spec":{"text":"hello"}}\'' in codes


def test_walkthrough_runs_verbatim(serve_process: Callable[..., ServeProcess], tmp_path: Path) -> None:
    if shutil.which("jq") is None or shutil.which("curl") is None:
        pytest.fail("the walkthrough uses curl and jq, which scripts/setup.sh installs")
    port = free_port()
    running = serve_process("--http-port", str(port))
    env = {**os.environ, "HTTP": f"http://127.0.0.1:{port}"}
    for index, step in enumerate(doc_steps(DOC)):
        if step.serve is not None:
            assert running.stop() == 0
            port = free_port()
            running = serve_process("--http-port", str(port), *step.serve)
            env["HTTP"] = f"http://127.0.0.1:{port}"
        run_step(index, step, tmp_path, env)
