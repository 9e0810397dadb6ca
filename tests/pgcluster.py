"""A throwaway PostgreSQL cluster for tests and benchmarks: `initdb` and `pg_ctl` in a temporary directory.

The Debian `postgresql` package's binaries (scripts/setup.sh installs it where missing). PostgreSQL
refuses to run as root, and CI runs as root: there the cluster belongs to the package's `postgres`
user, and its commands run through `runuser`. It listens on a free loopback port and on a Unix socket
in its own directory, requires a password (SCRAM), and is removed with its directory at `remove()`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg

__all__ = ("Cluster", "bindir", "cluster")

USER = "threadline"
PASSWORD = "pw-" + uuid.uuid4().hex
"""A fresh password per process: servers get it from `PGPASSWORD`, never from their `--store`."""


def bindir() -> Path:
    """The newest installed PostgreSQL's binaries."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if found:
        return found[-1].parent
    pg_config = shutil.which("pg_config")
    if pg_config:
        return Path(subprocess.check_output([pg_config, "--bindir"], text=True).strip())
    raise RuntimeError("PostgreSQL is not installed: run scripts/setup.sh (it installs `postgresql`)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One cluster: `start()`, `stop()`, `database()` for a fresh database's URL, `remove()`."""

    def __init__(self, *, fsync: bool = True) -> None:
        self.bin = bindir()
        self.root = Path(tempfile.mkdtemp(prefix="threadline-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._owner = "postgres" if os.geteuid() == 0 else None
        self._fsync = fsync
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self._owner is not None:
            shutil.chown(self.root, self._owner)
            shutil.chown(pwfile, self._owner)
        self._run("initdb", "-D", str(self.data), "-U", USER, "-A", "scram-sha-256", f"--pwfile={pwfile}")
        pwfile.unlink()

    @property
    def env(self) -> dict[str, str]:
        """The environment a client (a server under test) needs: the password, nothing else."""
        return {"PGPASSWORD": PASSWORD}

    def url(self, dbname: str = "postgres") -> str:
        """A URL without the password (it travels in `PGPASSWORD`)."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{dbname}"

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if self._owner is not None:
            command = ["runuser", "-u", self._owner, "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd=self.root)

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c max_connections=400"
            f" -c fsync={'on' if self._fsync else 'off'}"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """`fast` ends sessions and checkpoints; `immediate` is a crash (the next start recovers)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        command = [str(self.bin / "pg_ctl"), "-D", str(self.data), "status"]
        if self._owner is not None:
            command = ["runuser", "-u", self._owner, "--", *command]
        return subprocess.run(command, capture_output=True, cwd=self.root).returncode == 0

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url(dbname), password=PASSWORD, autocommit=True)

    def database(self) -> str:
        """A new empty database's URL."""
        name = "t_" + uuid.uuid4().hex[:12]
        with self.connect() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def remove(self) -> None:
        if self.running():
            with contextlib.suppress(subprocess.CalledProcessError):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def cluster(*, fsync: bool = True) -> Iterator[Cluster]:
    """A started cluster, removed afterwards."""
    made = Cluster(fsync=fsync)
    try:
        made.start()
        yield made
    finally:
        made.remove()
