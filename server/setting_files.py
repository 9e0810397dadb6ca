"""Reading the files settings name: the configuration file, a token file, the TLS pair.

Each is read whole at start, so each is read bounded and only from a regular file: `/dev/zero` would
otherwise be read until memory runs out, and opening a FIFO waits for a writer that may never come.
The file is opened without blocking (a FIFO opens at once then), checked with `fstat` on what was
opened, and read up to one byte past its limit, so a file that grows while it is read is refused too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ("CONFIG_FILE_LIMIT", "TLS_FILE_LIMIT", "TOKEN_FILE_LIMIT", "read_setting_file", "size_text")

CONFIG_FILE_LIMIT = 1 << 20
"""1 MiB: the largest configuration file; a real one is a few KiB."""
TOKEN_FILE_LIMIT = 64 << 10
"""64 KiB: the largest token file (the token travels in every call's metadata, which takes 16 KiB)."""
TLS_FILE_LIMIT = 1 << 20
"""1 MiB: the largest TLS certificate chain or key file."""


def size_text(limit: int) -> str:
    """`1 MiB`, `64 KiB`: a limit as the messages and the README spell it."""
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"


def read_setting_file(path: Path, limit: int) -> bytes:
    """The bytes of the regular file at `path`, refused past `limit`.

    Raises:
        OSError: The file cannot be opened or read.
        ValueError: It is not a regular file (a FIFO, a device, a directory), or larger than `limit`.
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ValueError("not a regular file")
        with open(descriptor, "rb", closefd=False) as file:
            data = file.read(limit + 1)
    finally:
        os.close(descriptor)
    if len(data) > limit:
        raise ValueError(f"larger than {size_text(limit)}")
    return data
