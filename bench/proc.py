"""Processes of the benchmark: the server under test, helper processes, and what `/proc` says of them.

The server's cost is read from `/proc/<pid>/stat` (user + system CPU of every thread, exited ones
included) and `/proc/<pid>/status` (`VmRSS`, `VmHWM`), so the figures are the server's own, whatever
the clients in other processes spend. Linux only, like the machine the numbers are recorded on.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = (
    "AGENTS",
    "CLK_TCK",
    "Helper",
    "ServerProcess",
    "cpu_seconds",
    "free_port",
    "gauge",
    "machine",
    "peak_rss",
    "rss",
    "start_clients",
    "thread_cpu_seconds",
)

CLK_TCK = os.sysconf("SC_CLK_TCK")
"""Clock ticks per second of `/proc/<pid>/stat` (100 on Linux: 10 ms resolution)."""

AGENTS = ("scenario", "stream", "idle", "rounds", "paced", "fanout")
"""The `bench.agents` factories every benchmarked server serves, under the same names."""

MAX_CONCURRENT_RUNS = 4096
"""`--max-concurrent-runs` of the benchmarked server: above the 1 000 concurrent runs of section (e)."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far, all threads (exited ones included)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime: fields 14 and 15 of proc(5)


def thread_cpu_seconds(pid: int) -> float:
    """CPU seconds of `pid`'s live threads, to the nanosecond (`/proc/<pid>/task/*/schedstat`).

    Far finer than `cpu_seconds` (10 ms ticks), for short measured batches; a thread that exits
    between two readings takes its time with it, so use it around work that keeps its threads.
    """
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):  # the thread just exited
            continue
    return total / 1e9


def free_port() -> int:
    """A loopback port free now (for a server's `--metrics-port`)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def gauges(port: int, *names: str) -> tuple[float, ...]:
    """The values of the metrics `names` on a server's metrics port, each summed over its labels, from
    one scrape."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        lines = response.read().decode().splitlines()
    values: list[float] = []
    for name in names:
        found = [float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith((name + " ", name + "{"))]
        if not found:
            raise RuntimeError(f"{name} is not on /metrics")
        values.append(sum(found))
    return tuple(values)


def gauge(port: int, name: str) -> float:
    """The value of the metric `name` on a server's metrics port, summed over its labels."""
    return gauges(port, name)[0]


def _kib_field(path: str, key: str) -> int:
    """The `key: N kB` line of a `/proc` file, in bytes."""
    for line in Path(path).read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _status(pid: int, key: str) -> int:
    return _kib_field(f"/proc/{pid}/status", key)


def rss(pid: int) -> int:
    """Resident set size of `pid` now, in bytes."""
    return _status(pid, "VmRSS")


def peak_rss(pid: int) -> int:
    """Peak resident set size of `pid` since it started (`VmHWM`), in bytes."""
    return _status(pid, "VmHWM")


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:  # pragma: no cover - not Linux
        pass
    try:
        memory = _kib_field("/proc/meminfo", "MemTotal")
    except (OSError, KeyError):  # pragma: no cover - not Linux
        memory = 0
    try:
        load = os.getloadavg()
    except OSError:  # pragma: no cover
        load = (0.0, 0.0, 0.0)
    import grpc
    import pydantic
    import pydantic_ai
    from google import protobuf

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory / 2**30, 1) if memory else None,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pydantic_ai": pydantic_ai.__version__,
        "pydantic": pydantic.VERSION,
        "grpcio": grpc.__version__,
        "protobuf": protobuf.__version__,
        "load_average_at_start": [round(x, 2) for x in load],
    }


def _threadline() -> list[str]:
    script = Path(sys.executable).with_name("threadline")
    return [str(script)] if script.exists() else [sys.executable, "-m", "server.cli"]


def _drain(stream: Any) -> None:
    for _ in stream:
        pass


@dataclass
class ServerProcess:
    """`threadline serve --port 0` serving the bench agents, as a child process of the benchmark."""

    store: str = "memory"
    """`--store`: `memory`, or `sqlite:PATH` of a file this benchmark owns (never the default file)."""
    args: tuple[str, ...] = ()
    """More `threadline serve` flags (e.g. (a)'s observed server's metrics and traces)."""
    process: subprocess.Popen[str] | None = None
    address: str = ""

    def __enter__(self) -> ServerProcess:
        agents = [arg for name in AGENTS for arg in ("--agent", f"{name}=bench.agents:{name}")]
        command = [
            *_threadline(),
            "serve",
            "--port",
            "0",
            "--store",
            self.store,
            "--max-concurrent-runs",
            str(MAX_CONCURRENT_RUNS),
            *agents,
            "--default-agent",
            "scenario",
            *self.args,
        ]
        # Logs (one JSON line per run start and end) are part of the server's cost; they are read
        # and dropped so the pipe never fills.
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        first = self.process.stdout.readline().strip()
        if not first.startswith("listening on "):
            self.process.kill()
            raise RuntimeError(
                f"threadline serve did not start: {first!r} {self.process.stderr.read()[-2000:]}"
            )
        self.address = first.removeprefix("listening on ")
        for stream in (self.process.stdout, self.process.stderr):
            threading.Thread(target=_drain, args=(stream,), daemon=True).start()
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def cpu(self) -> float:
        """The server's CPU seconds so far (10 ms resolution, exited threads included)."""
        return cpu_seconds(self.pid)

    def thread_cpu(self) -> float:
        """The CPU seconds of the server's live threads, to the nanosecond (`thread_cpu_seconds`)."""
        return thread_cpu_seconds(self.pid)

    def peak_rss(self) -> int:
        """The server's peak resident set size so far."""
        return peak_rss(self.pid)

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.process.kill()
                self.process.wait()


@dataclass
class Helper:
    """A helper process (`python -m bench.<module> ...`) speaking JSON lines on stdin/stdout.

    It prints one JSON line when it is ready, runs when it reads a line, and prints one JSON line of
    results; so several helpers start their work together, after their own set-up.
    """

    module: str
    args: Sequence[str] = ()
    process: subprocess.Popen[str] | None = None
    ready: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> Helper:
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module, *self.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        return self

    def wait_ready(self) -> dict[str, Any]:
        self.ready = self._read()
        return self.ready

    def send(self, message: dict[str, Any] | None = None) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(json.dumps(message or {}) + "\n")
        self.process.stdin.flush()

    def result(self) -> dict[str, Any]:
        return self._read()

    def _read(self) -> dict[str, Any]:
        assert self.process is not None and self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            assert self.process.stderr is not None
            self.process.wait(timeout=10)
            raise RuntimeError(f"{self.module} exited: {self.process.stderr.read()[-3000:]}")
        value: dict[str, Any] = json.loads(line)
        return value

    def close(self) -> None:
        if self.process is None:
            return
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def start_clients(mode: str, address: str, options: Sequence[dict[str, Any]]) -> list[Helper]:
    """One `bench.client MODE ADDRESS` process per `options` entry, each started and ready."""
    helpers = [Helper("bench.client", (mode, address, json.dumps(o))).start() for o in options]
    for helper in helpers:
        helper.wait_ready()
    return helpers
