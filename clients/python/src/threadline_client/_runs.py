"""Small helpers around runs: declaring client tools, reading outputs and events."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import betterproto2

from ._gen.threadline.v1 import ClientTool, RunEvent, RunResult, RunStatus

__all__ = ("client_tool", "event_case", "output")


def client_tool(name: str, parameters: Mapping[str, Any], *, description: str = "") -> ClientTool:
    """Declare a tool the host executes itself, for `RunSpec.client_tools`.

    The model may call it; the run then suspends with a `DEFERRED_KIND_EXTERNAL` item that the host
    answers with `external_result`. Declare the same tools in every run of the thread.

    Args:
        name: The name the model sees; must not clash with the agent's tools.
        parameters: The JSON Schema of the arguments, an object schema.
        description: What the tool does, for the model.
    """
    return ClientTool(
        name=name,
        description=description,
        parameters_json_schema=json.dumps(dict(parameters), ensure_ascii=False, separators=(",", ":")),
    )


def output(result: RunResult) -> Any:
    """A COMPLETED run's output, decoded from `output_json` (a text agent's output is a `str`).

    Raises:
        ValueError: The run did not complete, so it has no output.
    """
    if result.status != RunStatus.COMPLETED:
        raise ValueError(f"the run ended {result.status!s}, not COMPLETED; it has no output")
    return json.loads(result.output_json) if result.output_json else None


def event_case(event: RunEvent) -> str:
    """The name of the case a `RunEvent` carries (`"run_started"`, `"part_delta"`, `"result"`, ...).

    An empty string means a case this SDK's contract does not know (from a newer server); skip it.
    """
    name, _ = betterproto2.which_one_of(event, "event")
    return name
