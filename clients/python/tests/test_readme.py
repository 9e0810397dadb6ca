"""The README's quick start runs as written (against the suite's server instead of the default port)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_quick_start_runs(server_addr: str, server_token: str | None) -> None:
    quick_start = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)[0]
    client_args = f'"{server_addr}"' + (f", token={server_token!r}" if server_token else "")
    code = quick_start.replace('"127.0.0.1:50051"', client_args)
    assert code != quick_start, "the quick start no longer names the default address"

    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=60, check=False
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Tool results: delete_file: Deleted notes.txt."
