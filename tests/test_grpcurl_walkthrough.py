"""docs/grpcurl.md is executable: every `sh` block runs verbatim against a live `threadline serve`.

Each block's `<!-- expect: TEXT -->` comments must appear in its output (rc 0), and
`<!-- expect-fail: TEXT -->` ones in the output of a block that must fail. The blocks run in order
in one scratch directory, so files written by one step feed the next, as they would for a reader.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, ServeProcess

DOC = REPO / "docs" / "grpcurl.md"
_BLOCK = re.compile(r"```sh\n(?P<code>.*?)```\n(?P<notes>(?:<!-- expect(?:-fail)?: .*? -->\n)*)", re.DOTALL)
_NOTE = re.compile(r"<!-- (?P<kind>expect(?:-fail)?): (?P<text>.*?) -->")


@dataclass(frozen=True)
class Step:
    code: str
    expect: tuple[str, ...]
    should_fail: bool


def steps() -> list[Step]:
    result = []
    for block in _BLOCK.finditer(DOC.read_text()):
        notes = [(m["kind"], m["text"]) for m in _NOTE.finditer(block["notes"])]
        result.append(
            Step(
                block["code"],
                tuple(text for _, text in notes),
                any(kind == "expect-fail" for kind, _ in notes),
            )
        )
    return result


def grpcurl_dir() -> Path | None:
    """Prefer the Go-installed grpcurl 1.9 (v1 reflection), else the venv's 1.8.6 (v1alpha)."""
    for candidate in (Path.home() / "go" / "bin" / "grpcurl", REPO / ".venv" / "bin" / "grpcurl"):
        if candidate.exists():
            return candidate.parent
    return None


def test_the_doc_has_every_walkthrough_step() -> None:
    codes = "\n".join(step.code for step in steps())
    for needle in (" list", "describe", "StreamRun", "deferred_resume", 'schemaVersion = "2"'):
        assert needle in codes
    assert sum(step.should_fail for step in steps()) == 1


@pytest.mark.skipif(shutil.which("jq") is None, reason="the walkthrough uses jq")
@pytest.mark.skipif(grpcurl_dir() is None, reason="no grpcurl binary")
def test_walkthrough_runs_verbatim(serve_process: Callable[..., ServeProcess], tmp_path: Path) -> None:
    running = serve_process()
    bin_dir = grpcurl_dir()
    assert bin_dir is not None
    env = {**os.environ, "ADDR": running.address, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    for index, step in enumerate(steps()):
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", step.code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        output = done.stdout + done.stderr
        where = f"step {index}:\n{step.code}\n--- output ---\n{output}"
        assert (done.returncode != 0) is step.should_fail, where
        for text in step.expect:
            assert text in output, where
