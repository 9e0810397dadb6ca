"""docs/grpcurl.md is executable: every `sh` block runs verbatim against a live `threadline serve`.

Each block's `<!-- expect: TEXT -->` comments must appear in its output (rc 0), and
`<!-- expect-fail: TEXT -->` ones in the output of a block that must fail. The blocks run in order
in one scratch directory, so files written by one step feed the next, as they would for a reader.
A `<!-- serve: ARGS -->` comment restarts the server with those extra arguments for the blocks after
it, as the reader is told to (`$WORK` is a directory of the scratch directory).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, THREADLINE, ServeProcess
from setup_tools import go_bin_dir, setup_tool
from walkthrough import Step, doc_steps, run_step

DOC = REPO / "docs" / "grpcurl.md"


def steps() -> list[Step]:
    return doc_steps(DOC)


def test_the_doc_has_every_walkthrough_step() -> None:
    codes = "\n".join(step.code for step in steps())
    for needle in (" list", "describe", "StreamRun", "deferred_resume", 'schemaVersion = "2"'):
        assert needle in codes
    for needle in ("StreamThreadRun", "answers:", "ListCheckpoints", "ForkThread", "RollbackThread"):
        assert needle in codes
    for needle in ("JoinThreadRun", "after_sequence", "WatchThread", "DeleteThread", "StartThreadRun"):
        assert needle in codes
    assert "BUSY_STRATEGY_ENQUEUE" in codes and "BUSY_STRATEGY_INTERRUPT" in codes
    # The refused steps: a future schema version, answers whose batch was consumed, a reused request
    # ID, and a thread turn against a stale revision.
    assert sum(step.should_fail for step in steps()) == 4
    assert "shell-bg" in codes and "shell-wait 8" in codes
    assert "ask-child" in codes and "resume-child" in codes and "lineage: $c.parent" in codes
    assert [step.serve for step in steps() if step.serve] == [("--mount", "work=local:$WORK")]
    assert "traceparent" in codes and "OTEL_TRACES_EXPORTER=console threadline serve" in codes


def test_the_readmes_first_try_is_in_the_walkthrough() -> None:
    """The README's grpcurl commands are lines of the walkthrough, so the run below runs them too."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## A first try with grpcurl", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    walkthrough = {line for step in steps() for line in step.code.splitlines()}
    assert "grpcurl" in block and set(block.splitlines()) <= walkthrough


def test_grpcurl_is_the_one_setup_installs(tmp_path: Path) -> None:
    """With any GOPATH, the walkthrough runs `$(go env GOPATH)/bin/grpcurl`, as setup.sh installs it."""
    real = setup_tool("grpcurl")
    gopath = tmp_path / "gopath"
    (gopath / "bin").mkdir(parents=True)
    (gopath / "bin" / "grpcurl").symlink_to(real)
    env = {**os.environ, "GOPATH": str(gopath)}
    assert go_bin_dir(env) == gopath / "bin"
    assert setup_tool("grpcurl", env) == gopath / "bin" / "grpcurl"
    (gopath / "bin" / "grpcurl").unlink()
    with pytest.raises(pytest.fail.Exception, match=r"scripts/setup\.sh installs grpcurl there"):
        setup_tool("grpcurl", env)


def test_walkthrough_runs_verbatim(serve_process: Callable[..., ServeProcess], tmp_path: Path) -> None:
    if shutil.which("jq") is None:
        pytest.fail("the walkthrough uses jq, which scripts/setup.sh installs (run bash scripts/setup.sh)")
    bin_dir = setup_tool("grpcurl").parent
    running = serve_process()
    work = tmp_path / "work"
    work.mkdir()
    env = {
        **os.environ,
        "ADDR": running.address,
        "WORK": str(work),
        # grpcurl as setup installs it; `threadline` as the venv has it (the traces step starts one).
        "PATH": os.pathsep.join((str(bin_dir), str(THREADLINE.parent), os.environ["PATH"])),
    }
    for index, step in enumerate(steps()):
        if step.serve is not None:
            assert running.stop() == 0
            as_root = ["--allow-root-shell"] if os.geteuid() == 0 else []
            running = serve_process(*(arg.replace("$WORK", str(work)) for arg in step.serve), *as_root)
            env["ADDR"] = running.address
        run_step(index, step, tmp_path, env)
