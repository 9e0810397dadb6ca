"""(c) A state's envelope, encoded and decoded, against pydantic-ai's own round trip of its history.

Histories are realistic request/response pairs: a user prompt, a response with text and a tool call,
the tool's return, a text answer (with usage, model name and timestamps, as providers fill them).
Three ways, CPU per message:

- `pydantic_ai`: `ModelMessagesTypeAdapter.dump_json(messages)` then `.validate_json(...)`: the least
  a host that keeps the history as JSON pays to write and read it;
- `protobuf`: `state_to_pb(state).SerializeToString()`, then `state_from_pb(HarnessState.FromString(...))`
  (the server's decode: digest check, `load_state`, count check);
- `json`: `state.model_dump_json()` then `harness.load_state(...)`.

Each round runs a short batch of each, in one of the six orders; the ratio reported is the median of
the per-round ratios.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage
from threadline.v1 import state_pb2

from harness import HarnessState, load_state
from server.mapping.state import state_from_pb, state_to_pb

from .measure import median, ratio, sync_cpu_per_call

__all__ = ("envelope_section", "realistic_history")

_START = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)


def realistic_history(count: int) -> list[ModelMessage]:
    """`count` messages in cycles of prompt, text + tool call, tool return, answer."""
    messages: list[ModelMessage] = []
    turn = 0
    while len(messages) < count:
        at = _START + timedelta(minutes=turn)
        call_id = f"call_{turn:06d}"
        cycle: list[ModelMessage] = [
            ModelRequest(
                parts=[
                    UserPromptPart(
                        f"Turn {turn}: what changed in service {turn % 17} since yesterday?", timestamp=at
                    )
                ]
            ),
            ModelResponse(
                parts=[
                    TextPart("Let me check the deploy log for that service first."),
                    ToolCallPart(
                        "deploy_log", {"service": f"svc-{turn % 17}", "since": "24h"}, tool_call_id=call_id
                    ),
                ],
                usage=RequestUsage(input_tokens=812 + turn, output_tokens=41),
                model_name="gpt-4.1",
                timestamp=at,
                provider_name="openai",
            ),
            ModelRequest(
                parts=[
                    ToolReturnPart(
                        "deploy_log",
                        {"deploys": [{"version": f"1.{turn}.0", "status": "ok", "at": at.isoformat()}]},
                        tool_call_id=call_id,
                        timestamp=at,
                    )
                ]
            ),
            ModelResponse(
                parts=[TextPart(f"One deploy: version 1.{turn}.0 went out at {at:%H:%M} and is healthy.")],
                usage=RequestUsage(input_tokens=870 + turn, output_tokens=23),
                model_name="gpt-4.1",
                timestamp=at,
                provider_name="openai",
            ),
        ]
        messages.extend(cycle)
        turn += 1
    return messages[:count]


def _variants(messages: list[ModelMessage]) -> dict[str, Any]:
    state = HarnessState.new(message_history=messages)
    adapter = ModelMessagesTypeAdapter

    def pydantic_ai() -> None:
        adapter.validate_json(adapter.dump_json(messages))

    def protobuf() -> None:
        state_from_pb(state_pb2.HarnessState.FromString(state_to_pb(state).SerializeToString()))

    def json() -> None:
        load_state(state.model_dump_json())

    return {"pydantic_ai": pydantic_ai, "protobuf": protobuf, "json": json}


def envelope_section(*, sizes: tuple[int, ...], rounds: int, min_batch_s: float) -> dict[str, Any]:
    results: dict[str, Any] = {}
    ratios: dict[str, float] = {}
    for count in sizes:
        calls = _variants(realistic_history(count))
        for call in calls.values():  # warm-up, and a batch size that runs about `min_batch_s`
            call()
        probe = sync_cpu_per_call(calls["pydantic_ai"], 3).cpu_s
        batch = max(1, int(min_batch_s / max(probe, 1e-6)))
        # A short batch of each variant in turn, in every order in turn: what a call costs depends on
        # what ran just before it (the garbage it left, the memory it returned), so no variant always
        # follows the same one; `sync_cpu_per_call` collects garbage before each batch.
        orders = list(itertools.permutations(calls))
        measured = [
            {name: sync_cpu_per_call(calls[name], batch) for name in orders[index % len(orders)]}
            for index in range(rounds)
        ]
        per_message = {
            name: round(median([m[name].cpu_s for m in measured]) / count * 1e6, 3) for name in calls
        }
        results[str(count)] = {
            "batch": batch,
            "us_per_message": per_message,
            "bytes": len(ModelMessagesTypeAdapter.dump_json(realistic_history(count))),
        }
        for name in ("protobuf", "json"):
            ratios[f"envelope_{name}_over_pydantic_ai_{count}"] = median(
                [ratio(m[name].cpu_s, m["pydantic_ai"].cpu_s) for m in measured]
            )
    smallest, largest = str(sizes[0]), str(sizes[-1])
    for name in ("protobuf", "json", "pydantic_ai"):
        flat = ratio(results[largest]["us_per_message"][name], results[smallest]["us_per_message"][name])
        ratios[f"envelope_{name}_per_message_{largest}_over_{smallest}"] = flat
    return {"sizes": results, "rounds": rounds, "ratios": ratios}
