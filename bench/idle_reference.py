"""What an idle run costs in memory without a server: `python -m bench.idle_reference VARIANT N`.

Prints one JSON line: this process's RSS growth per run while `N` runs of the `idle` model wait inside
their model request, for `pydantic_ai` (`Agent.run_stream_events`) or `harness`
(`ExecutableAgent.stream`). A fresh process for each, so the figure is not shaped by earlier work.
Section (e) sets it beside the server's memory per idle stream and grpcio's own floor.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
from collections.abc import Awaitable, Callable

from pydantic_ai import Agent

from .agents import idle, idle_model
from .proc import cpu_seconds, rss


async def _measure(variant: str, runs: int) -> dict[str, float]:
    pid = os.getpid()
    one: Callable[[str], Awaitable[None]]
    if variant == "pydantic_ai":
        native: Agent[None, str] = Agent(idle_model())

        async def one(hold: str) -> None:
            async with native.run_stream_events(hold) as events:
                async for _ in events:
                    pass

    else:
        agent = idle()

        async def one(hold: str) -> None:
            async with agent.stream(hold) as stream:
                async for _ in stream:
                    pass

    for _ in range(3):  # warm-up: imports, schema builds, first-run caches
        await one("0")
    gc.collect()
    before = rss(pid)
    tasks = [asyncio.create_task(one("600")) for _ in range(runs)]
    # The runs are idle once this process stops burning CPU (all are waiting inside the model).
    while True:
        cpu = cpu_seconds(pid)
        await asyncio.sleep(0.5)
        if cpu_seconds(pid) - cpu < 0.03:
            break
    during = rss(pid)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"runs": runs, "kib_per_idle_run": round((during - before) / runs / 1024, 2)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_measure(sys.argv[1], int(sys.argv[2])))), flush=True)
