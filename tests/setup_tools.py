"""The tools scripts/setup.sh installs with `go install`, found where it puts them and nowhere else.

setup.sh installs into `$(go env GOPATH)/bin`, whatever GOPATH is. A test that looked elsewhere
(`~/go/bin`, or a venv's older grpcurl) would test another binary than the one the docs promise, so
a missing tool fails the test and names the set-up instead of falling back or skipping.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest


def go_bin_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$(go env GOPATH)/bin` under `env` (default: this process's environment), as setup.sh spells it."""
    done = subprocess.run(
        ["go", "env", "GOPATH"],
        env=dict(os.environ if env is None else env),
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(f"{done.stdout.strip()}/bin")


def setup_tool(name: str, env: Mapping[str, str] | None = None) -> Path:
    """The path of the Go tool `name` that setup.sh installed; fails the calling test if it is missing."""
    path = go_bin_dir(env) / name
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: scripts/setup.sh installs {name} there (run bash scripts/setup.sh)")
    return path
