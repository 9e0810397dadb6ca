"""A doc whose `sh` blocks are run verbatim by a test (docs/grpcurl.md, docs/http.md): its steps.

Each block's `<!-- expect: TEXT -->` comments must appear in its output (rc 0), and
`<!-- expect-fail: TEXT -->` ones in the output of a block that must fail. A `<!-- serve: ARGS -->`
comment restarts the server with those extra arguments for the blocks after it.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

_BLOCK = re.compile(r"```sh\n(?P<code>.*?)```\n(?P<notes>(?:<!-- expect(?:-fail)?: .*? -->\n)*)", re.DOTALL)
_NOTE = re.compile(r"<!-- (?P<kind>expect(?:-fail)?): (?P<text>.*?) -->")
_SERVE = re.compile(r"<!-- serve: (?P<args>.*?) -->")


@dataclass(frozen=True)
class Step:
    code: str
    expect: tuple[str, ...]
    should_fail: bool
    serve: tuple[str, ...] | None = None
    """Restart the server with these extra arguments before this step."""


def doc_steps(doc: Path) -> list[Step]:
    result = []
    text = doc.read_text()
    previous_end = 0
    for block in _BLOCK.finditer(text):
        notes = [(m["kind"], m["text"]) for m in _NOTE.finditer(block["notes"])]
        serve = _SERVE.search(text, previous_end, block.start())
        previous_end = block.end()
        result.append(
            Step(
                block["code"],
                tuple(text for _, text in notes),
                any(kind == "expect-fail" for kind, _ in notes),
                tuple(serve["args"].split()) if serve else None,
            )
        )
    return result


def run_step(index: int, step: Step, cwd: Path, env: dict[str, str]) -> None:
    """Run `step` verbatim in bash (`-euo pipefail`); assert it failed or not as its notes say, and
    that its output has every expected text."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", step.code],
        cwd=cwd,
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
