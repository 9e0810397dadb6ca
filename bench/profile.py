"""Profile the server on one of the benchmark's workloads: `python -m bench.profile WORKLOAD`.

    .venv/bin/python -m bench.profile stream_run              # py-spy flame graph of the server process
    .venv/bin/python -m bench.profile in_process --seconds 5  # pyinstrument, the harness in this process

Workloads: `run` and `stream_run` (section a's run through `Run` / `StreamRun`), `deltas` (StreamRun of
2 000 text deltas, section b), `turn` (the 50th turn of a thread through `Run`, section d),
`thread_turn` (turn 1 of a new thread through `RunThread` on an SQLite store, section g's
`thread_turn_1`; `CreateThread` is sampled too), and `in_process` (section a's run on the harness, no
server). Server workloads are driven from this
process while `py-spy record` (in the `dev` extra; `PY_SPY` names another binary)
samples the server, native frames included (`sendmsg`, `epoll_wait`); the output is a speedscope
JSON file by default, or a flame graph SVG with `--out x.svg`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
from threadline.v1 import harness_service_pb2, harness_service_pb2_grpc, run_pb2

from .agents import PROMPT, scenario
from .proc import ServerProcess
from .thread import build_thread
from .threads import ThreadClient
from .wire import CHANNEL_OPTIONS, PER_MESSAGE

WORKLOADS = ("run", "stream_run", "deltas", "turn", "thread_turn", "in_process")


async def _server_workload(name: str, seconds: float, out: Path) -> None:
    beside = Path(sys.executable).with_name("py-spy")  # installed into the same venv
    spy = os.environ.get("PY_SPY") or shutil.which("py-spy") or (str(beside) if beside.exists() else None)
    if spy is None:
        raise SystemExit("py-spy is not installed: `pip install py-spy`, or set PY_SPY to its path")
    with (
        tempfile.TemporaryDirectory() as scratch,
        ServerProcess(
            store=f"sqlite:{Path(scratch) / 'threads.db'}" if name == "thread_turn" else "memory"
        ) as server,
    ):
        async with grpc.aio.insecure_channel(server.address, options=CHANNEL_OPTIONS) as channel:
            stub = harness_service_pb2_grpc.HarnessServiceStub(channel)
            spec = run_pb2.RunSpec(agent="scenario", text=PROMPT)
            if name == "deltas":
                spec = run_pb2.RunSpec(agent="stream", text="2000")
            if name == "turn":
                previous = (await build_thread(channel, 50))[-1]
                assert previous is not None
                spec.previous_state.CopyFrom(previous)
            call: Callable[[], Awaitable[object]]
            if name == "thread_turn":
                threads = ThreadClient(channel)

                async def call() -> object:
                    return await threads.turn(await threads.create())

            elif name in ("run", "turn"):
                request = harness_service_pb2.RunRequest(spec=spec)

                async def call() -> object:
                    return await stub.Run(request)

            else:
                stream_request = harness_service_pb2.StreamRunRequest(
                    spec=spec, max_events_per_message=PER_MESSAGE
                )

                async def call() -> object:
                    return [r async for r in stub.StreamRun(stream_request)]

            for _ in range(3):
                await call()
            fmt = "flamegraph" if out.suffix == ".svg" else "speedscope"
            command = [spy, "record", "--pid", str(server.pid), "--native", "--rate", "500"]
            command += ["--duration", str(int(seconds)), "--format", fmt, "--output", str(out)]
            recorder = subprocess.Popen(command)
            started, cpu, calls = time.perf_counter(), server.cpu(), 0
            while time.perf_counter() - started < seconds:
                await call()
                calls += 1
            print(f"{calls} calls, {(server.cpu() - cpu) / calls * 1e3:.2f} ms of server CPU each")
            recorder.wait()


async def _in_process(seconds: float, out: Path) -> None:
    from pyinstrument import Profiler

    agent = scenario()

    async def call() -> None:
        async with agent.stream(PROMPT) as stream:
            async for _ in stream:
                pass

    for _ in range(3):
        await call()
    profiler = Profiler(async_mode="disabled")
    profiler.start()
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        await call()
    profiler.stop()
    out.write_text(profiler.output_html() if out.suffix == ".html" else profiler.output_text(show_all=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.split("\n")[0])
    parser.add_argument("workload", choices=WORKLOADS)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to sample (default 10)")
    parser.add_argument("--out", type=Path, help="output file (default: profile-WORKLOAD.json / .txt)")
    args = parser.parse_args(argv)
    if args.workload == "in_process":
        out = args.out or Path(f"profile-{args.workload}.txt")
        asyncio.run(_in_process(args.seconds, out))
    else:
        out = args.out or Path(f"profile-{args.workload}.json")
        asyncio.run(_server_workload(args.workload, args.seconds, out))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
